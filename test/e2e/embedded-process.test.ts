import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ControlPlaneProcess,
  MAIN,
  requireBuild,
  startControlPlaneProcess,
  stopProcess,
} from '../support/control-plane-process';
import { freePort } from '../support/services';

interface Running extends ControlPlaneProcess {
  tokenPath: string;
}

async function start(dataDir: string, port: number): Promise<Running> {
  const running = await startControlPlaneProcess(dataDir, port);
  return { ...running, tokenPath: /owner API token[^/]*(\/\S+)/.exec(running.output())?.[1] ?? '' };
}

const stop = (running: Running): Promise<number | null> => stopProcess(running.child);

describe('embedded mode as a real process', () => {
  let dataDir: string;
  beforeAll(() => {
    requireBuild();
    dataDir = mkdtempSync(join(tmpdir(), 'aileron-e2e-'));
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('first start bootstraps and prints the token path; a restart keeps every workspace', async () => {
    const port = await freePort();
    const first = await start(dataDir, port);
    expect(first.url).toBe(`http://127.0.0.1:${port}`);
    expect(first.tokenPath).toBe(join(dataDir, 'admin-token'));
    expect(statSync(first.tokenPath).mode & 0o777).toBe(0o600);
    const { readFileSync } = await import('node:fs');
    const token = readFileSync(first.tokenPath, 'utf8').trim();
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const created = await fetch(`${first.url}/v1/workspaces`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ slug: 'kept', name: 'Kept' }),
    });
    expect(created.status).toBe(201);
    expect(first.output()).not.toContain(token);

    // a second process on the same data directory is refused, not allowed to corrupt it
    const clash = spawnSync(process.execPath, [MAIN], {
      env: { ...process.env, AILERON_DATA_DIR: dataDir, PORT: String(await freePort()), DATABASE_URL: '' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(clash.status).toBe(1);
    expect(clash.stderr).toMatch(/another control plane \(pid \d+\) is using/);

    expect(await stop(first)).toBe(0);

    const second = await start(dataDir, port);
    expect(readFileSync(second.tokenPath, 'utf8').trim()).toBe(token);
    const list = await fetch(`${second.url}/v1/workspaces`, { headers: auth });
    const body = (await list.json()) as { workspaces: { slug: string }[] };
    expect(body.workspaces.map((w) => w.slug)).toEqual(['default', 'kept']);
    expect(await stop(second)).toBe(0);
  }, 180_000);

  it('bad configuration stops the process with one line naming the variable', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ PORT: 'eighty' }, /^aileron: invalid configuration: PORT must be an integer \(got "eighty"\)\n$/],
      [{ PORT: '70000' }, /PORT must be 1\.\.65535/],
      [
        { DATABASE_URL: 'mysql://user:hunter2@db/x' },
        /^aileron: invalid configuration: DATABASE_URL must be a postgres:\/\/ or postgresql:\/\/ URL\n$/,
      ],
      [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
      [
        { UPSTREAM_ALLOW_CIDRS: '10.0.0.0/8,banana' },
        /UPSTREAM_ALLOW_CIDRS must be a comma-separated list of CIDR ranges/,
      ],
    ];
    for (const [env, pattern] of cases) {
      const run = spawnSync(process.execPath, [MAIN], {
        env: { ...process.env, AILERON_DATA_DIR: dataDir, ...env },
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(run.status, JSON.stringify(env)).toBe(78);
      expect(run.stderr, JSON.stringify(env)).toMatch(pattern);
      expect(run.stderr.trim().split('\n'), JSON.stringify(env)).toHaveLength(1);
      expect(run.stderr).not.toContain('hunter2');
    }
  });
});
