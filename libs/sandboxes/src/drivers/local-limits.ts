import type { RunnerLimits, RunnerRequest } from '../runner-protocol';
import { RunnerError } from './driver';

/** The uid and gid a sandbox's processes have inside it, whoever they are on the host: never 0. */
export const SANDBOX_UID = 1000;

/**
 * What a sandbox's pids cgroup allows beyond its `pids`: the runner's own
 * threads (a dozen for Node), bwrap's two processes, an unpack's beside
 * them. `pids` itself binds each command (RLIMIT_NPROC of
 * the sandbox's own uid); the cgroup bounds them all together.
 */
export const PIDS_RESERVE = 64;

/**
 * What a sandbox's memory cgroup allows beyond its `memory_mb`, which bounds
 * each process of a command (its data limit): the runner's own Node (some
 * 60 MiB idle, more while it reads a large file or lists a large tree) and
 * the small programs around each command (bwrap, unshare, the namespace's
 * shell, the mounts of a client's sandbox policy).
 */
export const RUNNER_MEMORY_RESERVE_MB = 256;

/**
 * The memory of a sandbox as a whole, in MiB: `memory_mb` for its commands,
 * the reserve, and its /tmp and home at their full size. A tmpfs's pages are
 * charged to the sandbox that wrote them and cannot be reclaimed (no swap), so
 * a bound without them would let a full /tmp leave no memory to the commands,
 * or to a runner restarted after an out-of-memory kill; with them, what the
 * tmpfs holds never takes from `memory_mb`, and the host still knows the
 * sandbox's most.
 */
export function sandboxMemoryMb(memoryMb: number, tmpfsMb: number): number {
  return memoryMb + 2 * tmpfsMb + RUNNER_MEMORY_RESERVE_MB;
}

/**
 * A sandbox's memory cgroup as the answers tell of it. When its processes
 * together reach its bound, the kernel kills the one it finds worst (a
 * command's: the runner makes each command likelier than itself), and every
 * `exec` answered meanwhile says so; a runner killed so says so in the error
 * its waiters get.
 */
export class MemoryBound {
  /** `kills`: how many processes the cgroup's OOM killer has ended so far (undefined: not known) */
  constructor(
    readonly mb: number,
    private readonly kills: () => number | undefined,
  ) {}

  /** a count to compare with later */
  mark(): number {
    return this.kills() ?? 0;
  }

  /** whether the cgroup killed a process since `mark` */
  killedSince(mark: number): boolean {
    return (this.kills() ?? 0) > mark;
  }

  /** The note an `exec` answer gets when the cgroup killed since `mark`, while it ran. */
  note(mark: number): string {
    return this.killedSince(mark)
      ? `\n[aileron] the sandbox ran ${this.reason()}: the kernel killed a process of the sandbox (signal 9, SIGKILL)\n`
      : '';
  }

  /** why a runner the kernel killed stopped */
  reason(): string {
    return `out of its ${this.mb} MiB of memory`;
  }
}

/** An `exec` with the limits its sandbox's create request did not name filled in from `defaults`. */
export function withDefaultLimits<R extends RunnerRequest>(request: R, defaults: RunnerLimits | undefined): R {
  if (request.op !== 'exec' || !defaults) return request;
  return { ...request, limits: { ...defaults, ...request.limits } };
}

export const SANDBOX_FULL = 'SANDBOX_FULL';

/**
 * A bound on the bytes of a sandbox's /src, a directory of the data disk:
 * this machine has no quota to give one directory (no XFS project quota, no
 * loop device), so it is measured (`du`) after each change, in the
 * background, one measure at a time. Once /src holds more than the bound,
 * `write` (and `patch`) is refused with SANDBOX_FULL and commands run unable
 * to grow any file (RLIMIT_FSIZE 0: the write fails with EFBIG), though they
 * can remove files, until a measure finds /src under the bound again. A
 * single command may overshoot the bound until its end.
 */
export class SrcBound {
  private used = 0;
  private measuring: Promise<void> | null = null;
  private again = false;

  /** `du` runs `du` with these arguments (from a small process: a fork of the control plane costs tens of milliseconds) */
  constructor(
    private readonly src: string,
    private readonly maxBytes: number,
    private readonly du: (args: string[]) => Promise<{ code: number; stdout: Buffer; stderr: string }>,
    private readonly log: (line: string) => void,
  ) {
    this.changed();
  }

  get full(): boolean {
    return this.used > this.maxBytes;
  }

  /** SANDBOX_FULL for a write while /src is over its bound; an `exec` then runs unable to grow files. */
  apply<R extends RunnerRequest>(request: R): R {
    if (!this.full) return request;
    if (request.op === 'write')
      throw new RunnerError({
        code: SANDBOX_FULL,
        message: `${this.why()}: remove files with bash before writing more`,
      });
    if (request.op === 'exec') return { ...request, limits: { ...request.limits, fileSizeBytes: 0 } };
    return request;
  }

  /** The note an `exec` answer gets while /src is over its bound. */
  note(): string {
    return this.full
      ? `\n[aileron] ${this.why()}: until files are removed, commands cannot grow any file and write is refused\n`
      : '';
  }

  /** /src may have changed: measure it again (after the measure under way, if any), once the answer at hand has gone. */
  changed(): void {
    if (this.measuring) {
      this.again = true;
      return;
    }
    this.measuring = new Promise<void>((resolveTurn) => setImmediate(resolveTurn))
      .then(() => this.measure())
      .finally(() => {
        this.measuring = null;
        if (this.again) {
          this.again = false;
          this.changed();
        }
      });
  }

  private why(): string {
    return `/src holds ${this.used} bytes, more than the ${this.maxBytes} a sandbox may keep (${SANDBOX_FULL})`;
  }

  private async measure(): Promise<void> {
    // -x: one file system (a mount inside /src is not the sandbox's); -B1: bytes of disk, sparse files as they are stored
    const ran = await this.du(['-sxB1', '--', this.src]);
    const bytes = Number(/^(\d+)/.exec(ran.stdout.toString('utf8'))?.[1]);
    // a file removed while du looked makes it exit 1 with the total still printed
    if (Number.isFinite(bytes)) this.used = bytes;
    else this.log(`could not measure ${this.src}: ${ran.stderr.trim() || `du exited with ${ran.code}`}`);
  }
}
