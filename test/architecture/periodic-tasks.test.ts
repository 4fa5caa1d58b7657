import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(__dirname, '..', '..');

/** Timers that repeat but are no pass of work, each with why (docs/rules/periodic-tasks.md). */
const ALLOWED: Record<string, string> = {
  // a comment line on an open SSE stream: nothing to fail, overlap or wait for at shutdown, and it ends with its stream
  'libs/events/src/events.controller.ts': 'keep-alive of one event stream',
};

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'generated' || entry.name === 'node_modules' ? [] : sources(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [path] : [];
  });
}

/**
 * A pass that repeats (a sweep, a catch-up, a probe) is a PeriodicTask
 * (`@aileron/schedule`): it never overlaps itself, logs an outage once and its
 * end, and shutdown waits for it. A bare setInterval has none of that: most of
 * the sweeps written with one could run twice at once.
 */
describe('passes that repeat', () => {
  it('are PeriodicTasks, not setInterval', () => {
    const offenders = [...sources('libs'), ...sources('apps')]
      .map((path) => relative(ROOT, join(ROOT, path)))
      .filter((path) => !path.startsWith('libs/platform/schedule/') && ALLOWED[path] === undefined)
      .filter((path) => /\bsetInterval\s*\(/.test(readFileSync(join(ROOT, path), 'utf8')));
    expect(offenders).toEqual([]);
  });
});
