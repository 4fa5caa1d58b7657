import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { processStartTime } from './process-start';

const scratch = mkdtempSync(join(tmpdir(), 'process-start-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('processStartTime', () => {
  it('names a live process by its start, the same each time, whatever its command name holds', async () => {
    // the kernel takes the name from the file run: ") " in it must not shift the fields
    const odd = join(scratch, 'x) y (z');
    symlinkSync('/bin/sleep', odd);
    const child = spawn(odd, ['30'], { stdio: 'ignore' });
    await new Promise((resolve) => child.once('spawn', resolve));
    try {
      const start = processStartTime(child.pid!);
      expect(start).toMatch(/^\d+$/);
      expect(Number(start)).toBeGreaterThanOrEqual(Number(processStartTime(process.pid)));
      expect(processStartTime(child.pid!)).toBe(start);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('is undefined once the process is a zombie, and once it is gone', async () => {
    const child = spawn('/bin/true', [], { stdio: 'ignore' });
    const pid = child.pid!;
    // until node reaps it, the exited child is a zombie
    for (let i = 0; i < 200 && processStartTime(pid) !== undefined; i++)
      await new Promise((wake) => setTimeout(wake, 10));
    expect(processStartTime(pid)).toBeUndefined();
    await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(undefined)));
    expect(processStartTime(pid)).toBeUndefined();
  });
});
