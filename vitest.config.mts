import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import swc from 'unplugin-swc';
import { defineConfig } from 'vitest/config';
import { LongestFirst } from './test/support/longest-first';

// The tsconfig path aliases, so tests resolve @aileron/* exactly as tsc does.
const paths = (
  JSON.parse(readFileSync('tsconfig.json', 'utf8')) as { compilerOptions: { paths: Record<string, string[]> } }
).compilerOptions.paths;
const alias = Object.entries(paths)
  .sort(([a], [b]) => b.length - a.length)
  .map(([find, [target]]) => ({ find: new RegExp(`^${find.replace(/[/]/g, '\\/')}$`), replacement: resolve(target!) }));

// swc, not esbuild: Nest's dependency injection needs decorator metadata
const plugins = [
  swc.vite({
    module: { type: 'es6' },
    jsc: {
      target: 'es2022',
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
    },
  }),
];

export default defineConfig({
  plugins,
  resolve: { alias },
  test: {
    // unit specs beside the code, and everything under test/: own control planes, databases, services, processes
    include: ['libs/**/*.spec.ts', 'apps/**/*.spec.ts', 'test/**/*.test.ts'],
    // the global setup runs once: one PostgreSQL, one Redis, one migration
    globalSetup: ['test/support/global-setup.ts'],
    reporters: ['default'],
    // slowest files first (test/durations.json): the short ones fill the workers' gaps at the end
    sequence: { sequencer: LongestFirst },
    // four files at a time on two cores: most of a test's time is spent waiting on what it started (a server,
    // a sandbox, a database, a real MCP server's own timers): run one file at a time, the run's files use half
    // a core while they run (756 CPU-s in 1,516 s), and the slowest waits ~86% of its time, so three kept the
    // cores ~75% busy. Fresh-clone CI on the same tree: vitest took 434 s with three, 391 s with four. vitest's
    // default on this machine would be one
    maxWorkers: 4,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // expect.poll waits for a condition, like test/support/eventually.ts: its 1 s default is a race on a loaded machine
    expect: { poll: { timeout: 30_000 } },
    // One project, its files sharing two workers: each starts what it needs and stops it, and nothing in them
    // changes process-wide state (no module mocks, fake timers left behind or environment), so a worker's loaded
    // modules serve its next file instead of being loaded again (the app's modules: ~10 s of CPU a worker). The
    // suites that share a control plane (test/support/shared-control-plane.ts) find the one their worker started.
    // Projects would each have workers of their own, loading all of it again, and run their files apart.
    isolate: false,
  },
});
