import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { processStartTime } from './process-start';

/** `<host>~<pid>~<start>`: enough to tell, on the same host, whether the process still runs (a reused pid has another start time). */
interface Owner {
  host: string;
  pid: number;
  start: string;
}

const SEPARATOR = '~';

function ownerOf(name: string): Owner | null {
  const [host, pid, start] = name.split(SEPARATOR);
  return host && pid && /^\d+$/.test(pid) && start !== undefined ? { host, pid: Number(pid), start } : null;
}

/**
 * The journal directory of one process. Several processes may share a data
 * directory (replicas on one machine, or a worker beside the control plane),
 * so each writes only under its own `<host>~<pid>~<start>/` and never touches
 * another's while that process lives. What a process that died left behind is
 * taken over whole by exactly one survivor: an atomic rename into a name of
 * its own, which only one rename can win.
 */
export class JournalDirectory {
  readonly own: string;
  private readonly host: string;

  constructor(
    private readonly root: string,
    private readonly isAlive: (owner: Owner, host: string) => boolean = (owner, host) =>
      owner.host !== host || processStartTime(owner.pid) === owner.start,
  ) {
    this.host = hostname().replace(/[^A-Za-z0-9._-]/g, '_');
    const start = processStartTime(process.pid) ?? '';
    this.own = join(root, [this.host, process.pid, start].join(SEPARATOR));
  }

  open(): void {
    mkdirSync(this.own, { recursive: true, mode: 0o700 });
  }

  /**
   * Claims what dead processes on this host left: their directories, and the
   * bare segments of releases before per-process directories. Returns the
   * claimed directories, now this process's to replay and delete.
   */
  claimOrphans(): string[] {
    let names: string[];
    try {
      names = readdirSync(this.root);
    } catch {
      return [];
    }
    const claimed: string[] = [];
    const loose = names.filter((name) => name.endsWith('.jsonl'));
    if (loose.length > 0) {
      const into = this.claimName();
      mkdirSync(into, { mode: 0o700 });
      for (const file of loose) this.tryRename(join(this.root, file), join(into, file));
      claimed.push(into);
    }
    for (const name of names) {
      const path = join(this.root, name);
      if (path === this.own || path.startsWith(`${this.own}${SEPARATOR}`)) continue;
      const owner = ownerOf(name);
      if (!owner || this.isAlive(owner, this.host)) continue;
      const into = this.claimName();
      if (this.tryRename(path, into)) claimed.push(into);
    }
    return claimed;
  }

  /** Segment files of a directory, oldest first. */
  segments(dir: string): string[] {
    try {
      return readdirSync(dir)
        .filter((file) => file.endsWith('.jsonl'))
        .sort()
        .map((file) => join(dir, file));
    } catch {
      return [];
    }
  }

  /** A claimed directory is dropped once its records are in the audit log. */
  drop(dir: string): void {
    rmSync(dir, { recursive: true, force: true });
  }

  /** Our claims carry our own name first, so while we live nobody takes them from us, and if we die they are orphans like the rest. */
  private claimName(): string {
    return `${this.own}${SEPARATOR}takeover-${randomBytes(4).toString('hex')}`;
  }

  private tryRename(from: string, to: string): boolean {
    try {
      renameSync(from, to);
      return true;
    } catch {
      return false; // another process claimed it first
    }
  }
}
