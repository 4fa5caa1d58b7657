import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { readLines } from './lines';

function linesOf(chunks: Buffer[]): string[] {
  const stream = new PassThrough();
  const seen: string[] = [];
  readLines(stream, (line) => seen.push(line));
  for (const chunk of chunks) stream.write(chunk);
  return seen;
}

describe('readLines', () => {
  it('gives each line whole, however the bytes were cut into chunks, multi-byte characters included', () => {
    const text = `${JSON.stringify({ id: 1, result: { content: 'é€😀\n'.repeat(5000) } })}\n{"id":2}\n\n{"id":3}\n`;
    const bytes = Buffer.from(text);
    const expected = ['{"id":2}', '', '{"id":3}'];
    for (const size of [1, 3, 7, 4096, 65536, bytes.length]) {
      const chunks: Buffer[] = [];
      for (let at = 0; at < bytes.length; at += size) chunks.push(bytes.subarray(at, at + size));
      const seen = linesOf(chunks);
      expect(seen).toHaveLength(4);
      expect(JSON.parse(seen[0]!).result.content).toBe('é€😀\n'.repeat(5000));
      expect(seen.slice(1)).toEqual(expected);
    }
  });

  it('holds a line until its newline comes', () => {
    expect(linesOf([Buffer.from('{"id":1}\n{"id"'), Buffer.from(':2')])).toEqual(['{"id":1}']);
  });
});
