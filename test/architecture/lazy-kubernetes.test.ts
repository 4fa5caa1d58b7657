import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { requireBuild } from '../support/control-plane-process';

const APP = join(process.cwd(), 'dist', 'apps', 'control-plane', 'src', 'app.module.js');

/** The compiled packages a fresh process loads with the control plane's app module, by name. */
function packagesLoadedBy(env: Record<string, string>): string[] {
  const script = `require(${JSON.stringify(APP)});
    const names = new Set(Object.keys(require.cache).map((f) => f.match(/node_modules\\/((?:@[^/]+\\/)?[^/]+)/)?.[1]).filter(Boolean));
    process.stdout.write(JSON.stringify([...names]));`;
  return JSON.parse(
    execFileSync(process.execPath, ['-e', script], { env: { ...process.env, ...env }, encoding: 'utf8' }),
  );
}

/**
 * The Kubernetes client is about a second of CPU at every start and ~28 MB of memory; a
 * control plane whose pool and sandboxes run on this machine (`npm start`, compose) never
 * calls it. Its drivers are loaded when the configuration names them, not with the app.
 */
describe('the Kubernetes client', () => {
  it('is not loaded by a control plane whose drivers are local', () => {
    requireBuild();
    const loaded = packagesLoadedBy({});
    // the app's own packages are there: the check reads what it means to
    expect(loaded).toEqual(expect.arrayContaining(['@nestjs/common', '@prisma/adapter-pg']));
    expect(loaded).not.toContain('@kubernetes/client-node');
  });
});
