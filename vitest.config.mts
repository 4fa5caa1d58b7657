import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import swc from 'unplugin-swc';
import { defineConfig } from 'vitest/config';
import type { TestProjectInlineConfiguration } from 'vitest/config';
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

function project(
  name: string,
  test: NonNullable<TestProjectInlineConfiguration['test']>,
): TestProjectInlineConfiguration {
  return {
    plugins,
    resolve: { alias },
    // expect.poll waits for a condition, like test/support/eventually.ts: its 1 s default is a race on a loaded machine
    test: {
      name,
      testTimeout: 60_000,
      hookTimeout: 120_000,
      pool: 'forks',
      expect: { poll: { timeout: 30_000 } },
      ...test,
    },
  };
}

/**
 * The suites that share one control plane per worker (test/support/shared-control-plane.ts):
 * their files run one after another in the same worker, which the sharing needs.
 */
const SHARED = [
  'test/api/platform.test.ts',
  'test/api/policy-api.test.ts',
  'test/approvals/cancel.test.ts',
  'test/audit/audit-api.test.ts',
  'test/gateway/gateway-api.test.ts',
  'test/pool/everything.test.ts',
  'test/sandboxes/sandbox-glob.test.ts',
];

export default defineConfig({
  plugins,
  resolve: { alias },
  test: {
    // the root's global setup runs once for every project (one PostgreSQL, one Redis, one migration)
    globalSetup: ['test/support/global-setup.ts'],
    reporters: ['default'],
    // slowest files first, whatever their project (test/durations.json)
    sequence: { sequencer: LongestFirst },
    // two files at a time on two cores: most of a test's time is spent waiting on what it started (a
    // server, a sandbox, a database), and vitest's default on this machine would be one
    maxWorkers: 2,
    // projects run one after another (vitest orders them by name), each file in a worker of its own
    // unless its project shares workers: then the modules a file loaded are still loaded for the next
    projects: [
      // everything else under test/: own control planes, databases, services, processes. Their files
      // share workers too: each one starts what it needs and stops it, and nothing in them changes
      // process-wide state (no module mocks, fake timers or environment), so a worker's loaded
      // modules serve the next file instead of being loaded again (~7 s of CPU per file)
      project('integration', { include: ['test/**/*.test.ts'], exclude: SHARED, isolate: false }),
      project('shared', { include: SHARED, isolate: false }),
      // unit specs beside the code: no process-wide state, so nothing to isolate
      project('unit', { include: ['libs/**/*.spec.ts', 'apps/**/*.spec.ts'], isolate: false }),
    ],
  },
});
