import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonByteLength } from './json-size';

const measured = (value: unknown): number => Buffer.byteLength(JSON.stringify(value));

describe('jsonByteLength', () => {
  it('is the byte length of JSON.stringify for any JSON value, small strings and large', () => {
    // long strings with only the escapes the walk counts itself, and some with rare ones it leaves to JSON.stringify
    const longOf = (pieces: string[]) =>
      fc
        .array(fc.oneof(fc.string({ unit: 'grapheme-ascii' }), fc.constantFrom(...pieces)), {
          minLength: 300,
          maxLength: 600,
        })
        .map((parts) => parts.join(''));
    const common = ['"', '\\', '\n', '\r', '\t', '\b', '\f', 'é', '€', '😀'];
    const long = fc.oneof(longOf(common), longOf([...common, '\u0001', '\ud800']));
    const value = fc.letrec((tie) => ({
      leaf: fc.oneof(fc.string(), long, fc.double(), fc.integer(), fc.boolean(), fc.constant(null)),
      node: fc.oneof(
        { depthSize: 'small' },
        tie('leaf'),
        fc.array(tie('node')),
        fc.dictionary(fc.oneof(fc.string(), long), tie('node')),
      ),
    })).node;
    fc.assert(
      fc.property(value, (v) => jsonByteLength(v) === measured(v)),
      { numRuns: 100 },
    );
  });

  it('measures what JSON.stringify leaves out or turns into null, and toJSON, as it does', () => {
    const odd = {
      a: undefined,
      b: () => 1,
      c: [undefined, () => 1, Symbol('s')],
      d: new Date(0),
      e: { toJSON: () => 'x'.repeat(2000) },
      f: NaN,
    };
    expect(jsonByteLength(odd)).toBe(measured(odd));
  });

  it('counts a megabyte of text lines like a file read', () => {
    const content = `${'0'.repeat(1023)}\n`.repeat(1024);
    const answer = {
      content: [{ type: 'text', text: content }],
      structuredContent: { lines: 1024, total_lines: 1024 },
    };
    expect(jsonByteLength(answer)).toBe(measured(answer));
  });
});
