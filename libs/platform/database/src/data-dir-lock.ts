import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super(`another control plane (pid ${pid}) is using ${dataDir}; stop it first or set AILERON_DATA_DIR`);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * PGlite is a single-process database: two processes on one data directory
 * would corrupt it. A pid file taken with O_EXCL keeps the second one out; a
 * stale file left by a crashed process is taken over.
 */
export function lockDataDir(dataDir: string): () => void {
  const path = join(dataDir, 'control-plane.pid');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => {
        try {
          if (readFileSync(path, 'utf8').trim() === String(process.pid)) unlinkSync(path);
        } catch {
          // already gone
        }
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const pid = Number.parseInt(readFileSync(path, 'utf8').trim(), 10);
      if (Number.isInteger(pid) && pid !== process.pid && alive(pid)) throw new DataDirLockedError(dataDir, pid);
      unlinkSync(path);
    }
  }
  throw new Error(`cannot lock ${dataDir}`);
}
