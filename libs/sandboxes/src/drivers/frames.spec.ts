import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { readMessages } from './frames';

function messagesOf(bytes: Buffer, size: number, maxBytes?: number): unknown[] {
  const stream = new PassThrough();
  const seen: unknown[] = [];
  readMessages(
    stream,
    (message) => seen.push(message),
    (reason) => seen.push({ tooLarge: reason }),
    maxBytes,
  );
  for (let at = 0; at < bytes.length; at += size) stream.write(bytes.subarray(at, at + size));
  return seen;
}

/** what the runner writes for an answer whose result has raw fields */
function framed(id: number, result: Record<string, unknown>, raw: Record<string, string>): Buffer {
  const fields = Object.entries(raw).map(([field, text]) => [field, Buffer.byteLength(text)]);
  return Buffer.concat([
    Buffer.from(`${JSON.stringify({ id, result, raw: fields })}\n`),
    ...Object.values(raw).map((text) => Buffer.from(text)),
  ]);
}

const CHUNK_SIZES = [1, 3, 7, 4096, 65536, 1 << 30];

describe('readMessages', () => {
  it('gives each message whole, raw fields in their result, however the bytes were cut, multi-byte characters included', () => {
    const content = 'é€😀\n'.repeat(5000);
    const bytes = Buffer.concat([
      framed(1, { lines: 5000 }, { content }),
      Buffer.from('{"id":2,"result":{"stdout":"short"}}\n\n'),
      // two raw fields, one of them empty, then a line right after the last byte
      framed(3, { exitCode: 1 }, { stdout: `${content}no newline at the end`, stderr: '' }),
      Buffer.from('{"id":4,"error":{"code":"ENOENT","message":"gone"}}\n'),
    ]);
    for (const size of CHUNK_SIZES) {
      expect(messagesOf(bytes, size)).toEqual([
        { id: 1, result: { lines: 5000, content } },
        { id: 2, result: { stdout: 'short' } },
        { id: 3, result: { exitCode: 1, stdout: `${content}no newline at the end`, stderr: '' } },
        { id: 4, error: { code: 'ENOENT', message: 'gone' } },
      ]);
    }
  });

  it('holds a message until its line, and then its raw bytes, have all come', () => {
    expect(messagesOf(Buffer.from('{"id":1}\n{"id"'), 1 << 30)).toEqual([{ id: 1 }]);
    const whole = framed(5, {}, { content: 'x'.repeat(100) });
    expect(messagesOf(whole.subarray(0, whole.length - 1), 1 << 30)).toEqual([]);
    expect(messagesOf(whole, 1 << 30)).toEqual([{ id: 5, result: { content: 'x'.repeat(100) } }]);
  });

  it('skips what is not a JSON object, and takes a malformed raw list as no raw fields', () => {
    const bytes = Buffer.from(
      ['not json', '[1,2]', '"text"', '{"id":6,"result":{"a":1},"raw":[["content",-1]]}', '{"id":7}', ''].join('\n'),
    );
    for (const size of CHUNK_SIZES)
      expect(messagesOf(bytes, size)).toEqual([{ id: 6, result: { a: 1 }, raw: [['content', -1]] }, { id: 7 }]);
  });

  it('holds no message larger than the bound: says so once and reads nothing after it', () => {
    const after = Buffer.from('{"id":9}\n');
    for (const size of CHUNK_SIZES) {
      // a line that never ends
      expect(
        messagesOf(Buffer.concat([Buffer.from('{"id":1}\n'), Buffer.alloc(5000, 0x61), after]), size, 4096),
      ).toEqual([{ id: 1 }, { tooLarge: 'the runner sent a line larger than 4096 bytes' }]);
      // raw fields that say they are larger, before any of their bytes come
      const claimed = Buffer.from(
        `${JSON.stringify({
          id: 2,
          result: {},
          raw: [
            ['content', 4000],
            ['stderr', 97],
          ],
        })}\n`,
      );
      expect(messagesOf(Buffer.concat([claimed, after]), size, 4096)).toEqual([
        { tooLarge: 'the runner sent an answer larger than 4096 bytes' },
      ]);
    }
    // at the bound, all is well
    expect(messagesOf(framed(3, {}, { content: 'x'.repeat(4096) }), 1 << 30, 4096)).toEqual([
      { id: 3, result: { content: 'x'.repeat(4096) } },
    ]);
  });
});
