import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { HostUser } from '@aileron/bubblewrap';

/** How many uids the range holds: one per sandbox of this machine. */
export const SANDBOX_UID_COUNT = 65_536;

/**
 * The host uid each sandbox runs as when the control plane is root: one of
 * its own from a range nothing else uses, so RLIMIT_NPROC counts that
 * sandbox's processes alone, and every process of that uid is the
 * sandbox's (what DELETE ends). It is recorded as the owner of the
 * sandbox's /src directory: a sandbox made before (owned by root) gets one,
 * and its files with it, at its next start. The history beside it stays
 * root's, out of its reach.
 */
export class SandboxUsers {
  constructor(
    private readonly stateDir: string,
    private readonly base: number,
  ) {}

  /** The sandbox's user: the owner of `src` when it is one of the range's, else a free one, given `src` and everything in it. */
  of(id: string, src: string): HostUser {
    const owner = this.owner(src);
    if (owner !== undefined) return { uid: owner, gid: owner };
    const uid = this.free(id);
    chownTree(src, uid);
    return { uid, gid: uid };
  }

  /** The sandbox's uid if it has been given one (it has started since it was made). */
  owner(src: string): number | undefined {
    let owner: number;
    try {
      owner = statSync(src).uid;
    } catch {
      return undefined;
    }
    return this.inRange(owner) ? owner : undefined;
  }

  private inRange(uid: number): boolean {
    return uid >= this.base && uid < this.base + SANDBOX_UID_COUNT;
  }

  /** Starting from a place of its id's, the first uid no other sandbox's /src is owned by (one control plane per machine allocates: the local driver's rule). */
  private free(id: string): number {
    const used = new Set<number>();
    for (const other of readdirSync(this.stateDir)) {
      const owner = this.owner(join(this.stateDir, other, 'src'));
      if (owner !== undefined) used.add(owner);
    }
    const start = createHash('sha256').update(id).digest().readUInt32BE(0) % SANDBOX_UID_COUNT;
    for (let step = 0; step < SANDBOX_UID_COUNT; step++) {
      const uid = this.base + ((start + step) % SANDBOX_UID_COUNT);
      if (!used.has(uid)) return uid;
    }
    throw new Error(`every one of the ${SANDBOX_UID_COUNT} sandbox uids from ${this.base} is taken`);
  }
}

/**
 * Gives a tree the agent wrote to `uid`: GNU chown walks it by descriptors
 * (fts, relative to each directory's fd) and changes links themselves, so
 * no link, and no directory swapped for one, leads it out of the tree, and
 * no depth exhausts a stack of ours. Once per sandbox, while nothing of it runs.
 */
function chownTree(dir: string, uid: number): void {
  execFileSync('/bin/chown', ['-R', '-P', '-h', '--', `${uid}:${uid}`, dir], { stdio: ['ignore', 'ignore', 'pipe'] });
}
