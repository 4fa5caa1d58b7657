import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import type { HostUser } from './host-door';

/** How many uids one range holds: sandboxes have one range, pool instances another. */
export const HOST_UID_COUNT = 65_536;

export interface DirectoryUsersOptions {
  /** the range's first uid; nothing else on the machine may use the range */
  base: number;
  /** default HOST_UID_COUNT */
  count?: number;
  /** every directory that may record a uid of the range now: their owners are taken */
  directories: () => string[];
  /** what one uid is for, for the error when the range is full: "sandbox", "pool instance" */
  what: string;
}

/**
 * The host uid each unit (a sandbox, a pool instance's home) runs as when
 * the control plane is root: one of its own from a range nothing else uses,
 * so RLIMIT_NPROC counts that unit's processes alone, and every process of
 * that uid is the unit's. It is recorded as the owner of the unit's
 * directory, so it survives a restart of the control plane with no table of
 * ours: a directory made before (owned by root) gets one, and its files with
 * it, at its next start. One control plane per machine allocates (the local
 * drivers' rule): nothing here is atomic across processes.
 */
export class DirectoryUsers {
  private readonly count: number;

  constructor(private readonly options: DirectoryUsersOptions) {
    this.count = options.count ?? HOST_UID_COUNT;
  }

  /** The unit's user: the owner of `dir` when it is one of the range's, else a free one, given `dir` and everything in it. */
  of(key: string, dir: string): HostUser {
    const owner = this.owner(dir);
    if (owner !== undefined) return { uid: owner, gid: owner };
    const uid = this.free(key);
    chownTree(dir, uid);
    return { uid, gid: uid };
  }

  /** The unit's uid if it has been given one (it has started since its directory was made). */
  owner(dir: string): number | undefined {
    let owner: number;
    try {
      owner = statSync(dir).uid;
    } catch {
      return undefined;
    }
    return owner >= this.options.base && owner < this.options.base + this.count ? owner : undefined;
  }

  /** Starting from a place of its key's, the first uid no other unit's directory is owned by. */
  private free(key: string): number {
    const used = new Set<number>();
    for (const dir of this.options.directories()) {
      const owner = this.owner(dir);
      if (owner !== undefined) used.add(owner);
    }
    const start = createHash('sha256').update(key).digest().readUInt32BE(0) % this.count;
    for (let step = 0; step < this.count; step++) {
      const uid = this.options.base + ((start + step) % this.count);
      if (!used.has(uid)) return uid;
    }
    throw new Error(`every one of the ${this.count} ${this.options.what} uids from ${this.options.base} is taken`);
  }
}

/**
 * Gives a tree the unit wrote to `uid`, once, while nothing of it runs.
 * GNU find walks it by descriptors (fts: no link followed, no depth that
 * exhausts a stack of ours, never onto another file system) and chown runs
 * in each file's own directory on the link itself (-execdir, -h), so no
 * link and no directory swapped for one leads it out of the tree. A file
 * of more than one name stays as it is: a unit that ran as root before
 * (the trees this is for) could have hard-linked a host file into its tree,
 * and giving that file away would give the host's file away.
 */
function chownTree(dir: string, uid: number): void {
  execFileSync(
    '/usr/bin/find',
    [
      '-P',
      dir,
      '-xdev',
      '!',
      '(',
      '-type',
      'f',
      '-links',
      '+1',
      ')',
      '-execdir',
      '/bin/chown',
      '-h',
      '--',
      `${uid}:${uid}`,
      '{}',
      '+',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
}
