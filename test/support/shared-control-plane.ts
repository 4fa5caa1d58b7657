import { test } from 'vitest';
import { startTestControlPlane, TestControlPlane } from './control-plane';
import type { Backend } from './databases';

/**
 * One control plane per test worker and backend, for the suites that need
 * nothing of an installation but their own tenants: every file that runs in
 * the same worker uses it, instead of starting one of its own. The worker
 * stops it after its last file.
 *
 * A suite that shares it creates the organisations, workspaces, tokens and
 * users it looks at (test/support/builders.ts) and asserts nothing about
 * what others may add to the installation: never a count or a whole list of
 * the default organisation's workspaces, users, tokens or audit records. A
 * suite that needs settings of its own (AILERON_* variables), its own
 * database, an outage or a restart, or that changes what the whole
 * installation or the default organisation does (its identity provider, its
 * signing keys, its session keys) starts its own with startTestControlPlane.
 *
 * Every test file shares the same two workers (vitest.config.mts: one project,
 * no isolation between its files), so a worker's control plane serves every
 * sharing file it runs, and lives until the worker's last file.
 */
// eslint-disable-next-line no-empty-pattern -- vitest reads what a fixture depends on from this pattern: nothing
export const shared = test.extend('sharedControlPlane', { scope: 'worker' }, async ({}, { onCleanup }) => {
  const started = new Map<Backend, Promise<TestControlPlane>>();
  onCleanup(async () => {
    await Promise.all([...started.values()].map(async (starting) => (await starting.catch(() => undefined))?.close()));
  });
  return (backend: Backend): Promise<TestControlPlane> => {
    let starting = started.get(backend);
    if (!starting) {
      starting = startTestControlPlane(backend);
      // a start that failed fails this file; the next file tries again
      starting.catch(() => started.delete(backend));
      started.set(backend, starting);
    }
    return starting;
  };
});
