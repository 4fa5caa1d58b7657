import { describe, expect, it } from 'vitest';
import { storableJson, storableText } from './storable-json';

describe('JSON as PostgreSQL can hold it', () => {
  it('replaces NUL and lone surrogates with U+FFFD, and keeps surrogate pairs', () => {
    expect(storableText('a\u0000b')).toBe('a\uFFFDb');
    expect(storableText('half \ud800 and \udc00')).toBe('half \uFFFD and \uFFFD');
    expect(storableText('pair 😀')).toBe('pair 😀');
  });

  it('fixes keys and values at any depth, and returns the same value when nothing needs fixing', () => {
    const clean = { a: [1, 'two', { three: null }], b: true };
    expect(storableJson(clean)).toBe(clean);
    expect(storableJson({ 'k\u0000': [{ v: 'x\ud800' }], ok: 1 })).toEqual({ 'k\uFFFD': [{ v: 'x\uFFFD' }], ok: 1 });
    const withProto = JSON.parse('{"__proto__": "nul\\u0000"}') as Record<string, unknown>;
    const stored = storableJson(withProto);
    expect(Object.getPrototypeOf(stored)).toBe(Object.prototype);
    expect(Object.keys(stored)).toEqual(['__proto__']);
    expect(JSON.stringify(stored)).toBe('{"__proto__":"nul\uFFFD"}');
  });
});
