/** Characters JSON.stringify writes as a six-character \u escape: rare, left to it (as are lone surrogates, which it escapes too). */
// eslint-disable-next-line no-control-regex -- control characters are what it finds
const RARE_ESCAPES = /[\u0000-\u0007\u000b\u000e-\u001f]/;
/** Characters it escapes with a backslash and one more character. */
const SHORT_ESCAPES = ['"', '\\', '\n', '\r', '\t', '\b', '\f'];
/** Strings shorter than this are measured by JSON.stringify itself: the walk pays off on large ones. */
const LONG = 1024;

/**
 * Buffer.byteLength(JSON.stringify(value)), without building the text. A
 * tool's answer is measured for its execution record on every call; for a
 * large one (a megabyte of a file read from a sandbox) building its JSON to
 * count it cost more than everything else the control plane does with it.
 * Large strings are counted by their UTF-8 length and their escapes.
 */
export function jsonByteLength(value: unknown): number {
  if (typeof value === 'string') return stringBytes(value);
  if (value === null || typeof value !== 'object' || !isPlain(value))
    return Buffer.byteLength(JSON.stringify(value) ?? '');
  if (Array.isArray(value)) {
    let bytes = 2 + Math.max(0, value.length - 1);
    for (const item of value) bytes += omitted(item) ? 4 : jsonByteLength(item);
    return bytes;
  }
  let bytes = 2;
  let members = 0;
  for (const key of Object.keys(value)) {
    const item = (value as Record<string, unknown>)[key];
    if (omitted(item)) continue;
    bytes += (members++ === 0 ? 0 : 1) + stringBytes(key) + 1 + jsonByteLength(item);
  }
  return bytes;
}

/** arrays and plain objects without toJSON: what the walk measures as JSON.stringify writes it */
function isPlain(value: object): boolean {
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return false;
  if (Array.isArray(value)) return true;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

/** what JSON.stringify leaves out of an object (and writes as null in an array) */
function omitted(value: unknown): boolean {
  return value === undefined || typeof value === 'function' || typeof value === 'symbol';
}

function stringBytes(text: string): number {
  if (text.length < LONG || RARE_ESCAPES.test(text) || !text.isWellFormed())
    return Buffer.byteLength(JSON.stringify(text));
  let bytes = 2 + Buffer.byteLength(text);
  for (const character of SHORT_ESCAPES)
    for (let at = text.indexOf(character); at !== -1; at = text.indexOf(character, at + 1)) bytes++;
  return bytes;
}
