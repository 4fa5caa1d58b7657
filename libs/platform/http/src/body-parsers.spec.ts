import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { BODY_LIMIT_BYTES, readBodyText, readJsonBody } from './body-parsers';

/** Whether the promise has settled once everything already queued has run. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('readBodyText', () => {
  it('reads a body of a declared length that arrives in pieces, whole, and not before its last byte', async () => {
    const body = new PassThrough();
    const text = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"échec"}}';
    const bytes = Buffer.from(text);
    const read = readJsonBody(body, { 'content-length': String(bytes.length) });
    // split inside the two-byte "é": the pieces are joined as bytes, not decoded one by one
    const cut = bytes.indexOf(Buffer.from('é')) + 1;
    body.write(bytes.subarray(0, cut));
    expect(await settled(read)).toBe(false);
    body.write(bytes.subarray(cut));
    // all declared bytes are in: the body is whole without waiting for the stream's end
    expect(await read).toEqual(JSON.parse(text));
  });

  it('reads a body of no declared length (chunked) to its end', async () => {
    const body = new PassThrough();
    const read = readBodyText(body, {});
    body.write('{"a":');
    expect(await settled(read)).toBe(false);
    body.end('1}');
    expect(await read).toBe('{"a":1}');
  });

  it('refuses a body over the limit, declared or not, with a stable code', async () => {
    await expect(
      readBodyText(new PassThrough(), { 'content-length': String(BODY_LIMIT_BYTES + 1) }),
    ).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    const body = new PassThrough();
    const read = readBodyText(body, {});
    body.end(Buffer.alloc(BODY_LIMIT_BYTES + 1, 32));
    await expect(read).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
  });

  it('refuses an empty body and malformed JSON with their codes', async () => {
    const empty = new PassThrough();
    const none = readJsonBody(empty, { 'content-length': '0' });
    empty.end();
    await expect(none).rejects.toMatchObject({ code: 'MALFORMED_JSON' });
    const bad = new PassThrough();
    const read = readJsonBody(bad, { 'content-length': '5' });
    bad.end('{"a":');
    await expect(read).rejects.toMatchObject({ code: 'MALFORMED_JSON' });
  });
});
