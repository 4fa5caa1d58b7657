import type { Readable } from 'node:stream';
import type { RawFields } from '../runner-protocol';

const NEWLINE = 0x0a;
/**
 * The most one message may hold: above what any answer carries (a 32 MiB
 * file read, a snapshot's diff as base64), below what would strain the
 * control plane, which holds a message whole until it is complete.
 */
export const MAX_MESSAGE_BYTES = 256 * 1024 * 1024;

interface Awaiting {
  message: { result: Record<string, unknown> };
  fields: RawFields;
  next: number;
}

/**
 * Calls `onMessage` with each message a runner sends (protocol.ts): a JSON
 * line, with the long strings of its result after it as raw UTF-8 bytes
 * when its `raw` lists them. Only its being an object is checked: the
 * runner is ours. A line that is not a JSON object is skipped.
 *
 * A file read of a megabyte is one message: its bytes are joined once and
 * decoded once, never parsed as JSON (which cost the control plane's thread
 * about 1.5 ms per megabyte, and the runner 2.6 ms to write).
 *
 * A message over `maxBytes` (a line that never ends, raw fields that
 * say they are larger) is not held: `onTooLarge` is told once, reading stops,
 * and the caller ends the runner, whose channel can no longer be trusted.
 */
export function readMessages<T>(
  stream: Readable,
  onMessage: (message: T) => void,
  onTooLarge: (reason: string) => void,
  maxBytes = MAX_MESSAGE_BYTES,
): void {
  let held: Buffer[] = [];
  let heldBytes = 0;
  let awaiting: Awaiting | null = null;
  let broken = false;
  const tooLarge = (what: string): void => {
    broken = true;
    held = [];
    heldBytes = 0;
    awaiting = null;
    onTooLarge(`the runner sent ${what} larger than ${maxBytes} bytes`);
  };
  const take = (): Buffer => {
    const bytes = held.length === 1 ? held[0]! : Buffer.concat(held, heldBytes);
    held = [];
    heldBytes = 0;
    return bytes;
  };
  /** fills the awaited fields from what is held, and hands the message on once they all are */
  const complete = (): void => {
    while (awaiting) {
      const [field, bytes, binary] = awaiting.fields[awaiting.next]!;
      if (heldBytes < bytes) return;
      // a copy: what is held may be a view of a larger chunk, which a kept Buffer would pin
      awaiting.message.result[field] = binary === 1 ? Buffer.from(take()) : take().toString('utf8');
      if (++awaiting.next === awaiting.fields.length) {
        const { message } = awaiting;
        awaiting = null;
        onMessage(message as T);
      }
    }
  };
  stream.on('data', (chunk: Buffer) => {
    if (broken) return;
    let start = 0;
    while (start < chunk.length) {
      if (awaiting) {
        const want = awaiting.fields[awaiting.next]![1] - heldBytes;
        const end = Math.min(chunk.length, start + want);
        held.push(chunk.subarray(start, end));
        heldBytes += end - start;
        start = end;
        complete();
        continue;
      }
      const end = chunk.indexOf(NEWLINE, start);
      if (end === -1) {
        held.push(chunk.subarray(start));
        heldBytes += chunk.length - start;
        if (heldBytes > maxBytes) tooLarge('a line');
        return;
      }
      held.push(chunk.subarray(start, end));
      heldBytes += end - start;
      if (heldBytes > maxBytes) return tooLarge('a line');
      start = end + 1;
      const message = parse(take().toString('utf8'));
      if (!message) continue;
      const fields = rawFields(message);
      if (!fields) {
        onMessage(message as T);
        continue;
      }
      if (fields.reduce((total, [, bytes]) => total + bytes, 0) > maxBytes) return tooLarge('an answer');
      delete message.raw;
      awaiting = { message: message as Awaiting['message'], fields, next: 0 };
      // empty fields are whole already, and no more bytes may come for them
      complete();
    }
  });
}

function parse(line: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(line);
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

/** the message's raw fields when it has some and they are well formed (a result to put them in, sizes that are byte counts) */
function rawFields(message: Record<string, unknown>): RawFields | null {
  const { raw, result } = message;
  if (!Array.isArray(raw) || raw.length === 0) return null;
  if (result === null || typeof result !== 'object' || Array.isArray(result)) return null;
  const wellFormed = raw.every(
    (entry: unknown) =>
      Array.isArray(entry) &&
      (entry.length === 2 || (entry.length === 3 && entry[2] === 1)) &&
      typeof entry[0] === 'string' &&
      Number.isSafeInteger(entry[1]) &&
      (entry[1] as number) >= 0,
  );
  return wellFormed ? (raw as RawFields) : null;
}
