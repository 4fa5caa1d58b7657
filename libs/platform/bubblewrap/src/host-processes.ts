import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** The host pids whose real uid is `uid`, zombies (already ended, waiting for their parent) left out. */
export function processesOfUser(uid: number): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = readFileSync(`/proc/${name}/status`, 'utf8');
      if (Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]) === uid && !/^State:\s+Z/m.test(status)) found.push(Number(name));
    } catch {
      // gone while we looked
    }
  }
  return found;
}

/**
 * Kills every host process of `uid`, again until none is left: for a uid
 * that is one sandbox's alone, everything that sandbox started, wherever it
 * detached to. Never for a uid anything else runs as.
 */
export async function endProcessesOfUser(uid: number): Promise<void> {
  if (uid === 0 || uid === process.getuid?.()) throw new Error(`refusing to kill every process of uid ${uid}`);
  for (let pass = 0; pass < 200; pass++) {
    const pids = processesOfUser(uid);
    if (pids.length === 0) return;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    await sleep(5);
  }
}
