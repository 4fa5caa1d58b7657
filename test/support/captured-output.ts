export interface CapturedOutput {
  text(): string;
  lines(): string[];
  restore(): void;
}

/**
 * Everything the process writes to stdout and stderr, the JSON log lines
 * included: pino writes through `process.stdout.write` once that is replaced
 * before the logger is made, so this goes in before the control plane starts.
 */
export function captureOutput(): CapturedOutput {
  const chunks: string[] = [];
  const originals = { stdout: process.stdout.write, stderr: process.stderr.write };
  for (const stream of [process.stdout, process.stderr]) {
    // kept, not passed on: trace-level logs would bury the test report
    stream.write = ((chunk: string | Uint8Array, encodingOrCallback?: unknown, callback?: unknown) => {
      chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      const done = typeof encodingOrCallback === 'function' ? encodingOrCallback : callback;
      if (typeof done === 'function') queueMicrotask(() => (done as () => void)());
      return true;
    }) as typeof stream.write;
  }
  return {
    text: () => chunks.join(''),
    lines: () => chunks.join('').split('\n').filter(Boolean),
    restore() {
      process.stdout.write = originals.stdout;
      process.stderr.write = originals.stderr;
    },
  };
}
