import { Clock } from '@aileron/clock';
import { PeriodicTask, type PeriodicTaskOptions } from './periodic-task';

/**
 * When a sweep whose work has deadlines in the data (an approval's expiry, an
 * agent session's end) next has something to do. Its periodic task still ticks
 * every few seconds, but a tick goes to the database only when the earliest
 * deadline the last look found has passed, when this process wrote something
 * due sooner (`expect`, after its commit), or when `backstopMs` went by since
 * the last look, for what other processes wrote. An idle control plane then
 * makes one query every backstop instead of one every tick: on PGlite each one
 * is the control plane's own thread running PostgreSQL.
 *
 * A test that moves the clock past a deadline gets the next tick's look, as
 * before: the deadline is compared with the clock, not slept until.
 */
export class NextDue {
  /** the earliest deadline known; -Infinity before the first look (unknown: look) */
  private next = Number.NEGATIVE_INFINITY;
  private lastLook = Number.NEGATIVE_INFINITY;
  private looking = false;
  /** what `expect` was told while a look ran: its query may have read before that commit */
  private toldDuringLook = Number.POSITIVE_INFINITY;

  constructor(
    private readonly clock: Clock,
    private readonly backstopMs: number,
  ) {}

  /** Whether a look is due now. */
  get due(): boolean {
    const now = this.clock.now();
    return now >= this.next || now - this.lastLook >= this.backstopMs;
  }

  /** Something this process committed falls due at `at`. Call it after the commit, so the next look can read it. */
  expect(at: Date): void {
    const time = at.getTime();
    this.next = Math.min(this.next, time);
    if (this.looking) this.toldDuringLook = Math.min(this.toldDuringLook, time);
  }

  /**
   * Runs `look` if one is due: it does the sweep's work and answers the
   * earliest deadline still in the data (null: none). A look that fails
   * leaves the sweep due, so the next tick tries again.
   */
  async run(look: () => Promise<Date | null>): Promise<void> {
    if (!this.due) return;
    const started = this.clock.now();
    this.looking = true;
    this.toldDuringLook = Number.POSITIVE_INFINITY;
    try {
      const next = await look();
      this.next = Math.min(next?.getTime() ?? Number.POSITIVE_INFINITY, this.toldDuringLook);
      this.lastLook = started;
    } finally {
      this.looking = false;
    }
  }
}

export interface DeadlineSweepOptions extends Omit<PeriodicTaskOptions, 'run'> {
  /** how long what other processes wrote may wait for a look when this one knows of nothing due sooner */
  backstopMs: number;
  /** one pass: the sweep's work, then the earliest deadline still in the data (null: none) */
  look: () => Promise<Date | null>;
}

/**
 * A periodic task that goes to the database only when `NextDue` says so: the
 * sweeps whose work has deadlines (expiries, checkpoints, leases) share this,
 * so none of them queries an idle database every tick.
 */
export class DeadlineSweep {
  private readonly due: NextDue;
  private readonly task: PeriodicTask;

  constructor({ backstopMs, look, ...options }: DeadlineSweepOptions) {
    this.due = new NextDue(options.clock ?? new Clock(), backstopMs);
    this.task = new PeriodicTask({ ...options, run: () => this.due.run(look) });
  }

  /** Started and not stopped. */
  get running(): boolean {
    return this.task.running;
  }

  start(): void {
    this.task.start();
  }

  stop(): Promise<void> {
    return this.task.stop();
  }

  /** Something this process committed falls due at `at` (after its commit). */
  expect(at: Date): void {
    this.due.expect(at);
  }

  /** A look now (or right after the one under way), whenever the last one was. */
  lookNow(at: Date): void {
    this.due.expect(at);
    this.task.runNow();
  }
}

/** Runs `pass` until it handles fewer than a full batch: what was due is done. */
export async function drain(pass: () => Promise<number>, batch: number): Promise<void> {
  while ((await pass()) === batch);
}
