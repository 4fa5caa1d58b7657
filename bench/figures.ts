import { readFileSync } from 'node:fs';

/**
 * What every bench reports: one figure per comparison, one JSON line each with
 * the fields of `Figure` below, a shape CI and people rely on alike (README,
 * `npm run bench`): keep it.
 */
export interface Figure {
  bench: string;
  figure: string;
  value: number;
  baseline: string;
  ratio: number;
  goal: number;
  ok: boolean;
}

export interface Bench {
  name: string;
  summary: string;
  run(): Promise<Figure[]>;
}

/**
 * CPU time of this process's main thread, from Linux's per-thread accounting
 * (undefined elsewhere): the server's work when the load runs in a worker
 * thread, steadier than rates while the machine's other tenants come and go.
 */
export function mainThreadCpuMs(): number | undefined {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    // after the command name, which may hold spaces: utime and stime are the 12th and 13th fields
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

/** Linux's USER_HZ: the unit of /proc's CPU times on every architecture Node runs on. */
const CLOCK_TICKS = 100;

export type Better = 'lower' | 'higher';

export interface FigureInput {
  bench: string;
  figure: string;
  value: number;
  /** what the value was compared with, measured in the same run */
  baseline: { what: string; value: number; unit: string };
  goal: number;
  better: Better;
}

/**
 * The baseline's own number goes into the description: the contract keeps
 * `baseline` a string, yet a reader of a failed run wants both sides.
 */
export function figure(input: FigureInput): Figure {
  const ratio = input.value / input.baseline.value;
  const measured = Number.isFinite(ratio) && input.value > 0 && input.baseline.value > 0;
  const ok = measured && (input.better === 'lower' ? ratio <= input.goal : ratio >= input.goal);
  return {
    bench: input.bench,
    figure: input.figure,
    value: round(input.value),
    baseline: `${input.baseline.what} (${round(input.baseline.value)} ${input.baseline.unit})`,
    // JSON has no NaN or Infinity; a broken measurement must still print a valid line
    ratio: Number.isFinite(ratio) ? round(ratio, 4) : 0,
    goal: input.goal,
    ok,
  };
}

function round(value: number, digits = 2): number {
  if (!Number.isFinite(value)) return 0;
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** Nearest-rank percentile; sorts a copy so callers may keep sample order. */
export function percentile(samples: ArrayLike<number>, p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = Float64Array.from(samples).sort();
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export function median(values: number[]): number {
  return percentile(values, 50);
}

/** Human-readable progress; stdout is reserved for the figures. */
export function note(line: string): void {
  process.stderr.write(`${line}\n`);
}
