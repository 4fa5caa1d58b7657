import { constants as osConstants } from 'node:os';
import { Transform } from 'node:stream';
import type { Failure } from './failure';

/** what the runner keeps of a command's (or a tool's) stdout and of its stderr, each */
const MAX_OUTPUT_BYTES = 1024 * 1024;

/** Collects a stream up to the cap; what is cut is counted, not kept. */
export function collector(): { push(chunk: Buffer): void; text(): string; truncated(): boolean } {
  const chunks: Buffer[] = [];
  let kept = 0;
  let cut = false;
  return {
    push(chunk) {
      if (kept >= MAX_OUTPUT_BYTES) {
        cut = true;
        return;
      }
      const room = MAX_OUTPUT_BYTES - kept;
      chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk);
      kept += Math.min(chunk.length, room);
      if (chunk.length > room) cut = true;
    },
    text: () => Buffer.concat(chunks).toString('utf8'),
    truncated: () => cut,
  };
}

/** Passes a stream's bytes on, failing with `tooLarge` once more than `maxBytes` went through. */
export function bounded(maxBytes: number, tooLarge: () => Failure): { counter: Transform; bytes(): number } {
  let bytes = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      if (bytes > maxBytes) done(tooLarge());
      else done(null, chunk);
    },
  });
  return { counter, bytes: () => bytes };
}

/** A child's exit as a shell says it: its code, or 128 + the signal that ended it. */
export function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  return code ?? (signal ? 128 + (osConstants.signals[signal] ?? 9) : 1);
}
