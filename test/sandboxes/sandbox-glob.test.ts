import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, describe, expect, it } from 'vitest';
import { textOf } from '../pool/mcp-client';
import { aWorkspace } from '../support/builders';
import type { TestControlPlane } from '../support/control-plane';
import { shared } from '../support/shared-control-plane';
import { agentOn } from './box';

/** What the runner's walk answers at most, in bytes of paths (MAX_WALK_BYTES in the runner's ops/files.ts). */
const WALK_BYTES = 4 * 1024 * 1024;

interface Globbed {
  files: string[];
  truncated: boolean;
}

describe('the glob tool on a tenant’s pattern (embedded, bubblewrap)', () => {
  let cp: TestControlPlane;
  let ws: string;
  const clients: Client[] = [];

  shared.beforeAll(async ({ sharedControlPlane }) => {
    cp = await sharedControlPlane('pglite');
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { body: { default: 'allow', rules: [] } });
  }, 120_000);

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
  });

  /** A sandbox holding what `setup` (bash in /src) made, and a tool call on it as an agent session. */
  async function aSandboxWith(
    name: string,
    setup: string,
  ): Promise<(tool: string, args: Record<string, unknown>) => Promise<Record<string, unknown>>> {
    const made = await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, { body: { name } });
    expect(made.status, made.text).toBe(201);
    const { call } = await agentOn(cp, ws, name, clients, { timeoutMs: 120_000 });
    const ran = await call('bash', { command: `set -e; ${setup}` });
    expect(ran.isError, textOf(ran)).toBeFalsy();
    expect(ran.structuredContent, textOf(ran)).toMatchObject({ exitCode: 0 });
    return call;
  }

  it('a pattern that backtracks answers within seconds, and /healthz answers every tenant meanwhile', async () => {
    const a40 = 'a'.repeat(40);
    // forty-character names: one all `a`s (half a minute of backtracking for picomatch), one that matches, and ordinary ones
    const call = await aSandboxWith(
      'stars',
      `mkdir -p tree/${a40} && cd tree && touch ${a40}/${a40} ${'a'.repeat(39)}b && for i in $(seq 100); do touch "$(printf 'name-%035d' "$i")"; done`,
    );

    const healthz: number[] = [];
    let settled = false;
    const started = performance.now();
    const globbed = call('glob', { pattern: '*a*a*a*a*a*a*a*a*a*a*b', path: 'tree' }).finally(() => (settled = true));
    // a request in flight whenever the glob is: each must answer while the glob works, not after it
    while (!settled) {
      const asked = performance.now();
      const answer = await fetch(`${cp.url}/healthz`);
      expect(answer.status).toBe(200);
      healthz.push(performance.now() - asked);
    }
    const result = await globbed;
    const took = performance.now() - started;

    expect(result.isError, textOf(result)).toBeFalsy();
    expect(result.structuredContent).toEqual({ files: [`${'a'.repeat(39)}b`], truncated: false });
    expect(took).toBeLessThan(5_000);
    expect(Math.max(...healthz)).toBeLessThan(1_000);
  });

  it('a walk over more long paths than it answers stops at its byte bound and says truncated', async () => {
    // 8,000 paths of about 600 bytes: 4.6 MiB of names, and far fewer files than the count bound
    const d200 = 'd'.repeat(200);
    const call = await aSandboxWith(
      'long-paths',
      `mkdir -p long/${d200}/${d200} && cd long/${d200}/${d200} && for i in $(seq 8000); do : > "$(printf '%0200d' "$i")"; done`,
    );

    const result = await call('glob', { pattern: '**', path: 'long' });
    expect(result.isError, textOf(result)).toBeFalsy();
    const { files, truncated } = result.structuredContent as unknown as Globbed;
    expect(truncated).toBe(true);
    expect(files.length).toBeGreaterThan(0);
    expect(files.length).toBeLessThan(8_000);
    expect(files.reduce((bytes, file) => bytes + Buffer.byteLength(file), 0)).toBeLessThanOrEqual(WALK_BYTES);
    expect(textOf(result)).toMatch(/the walk stopped early: more files may match; search a narrower path\)$/);
  });

  it('a pattern it cannot read is an invalid argument saying why, and nothing is walked', async () => {
    const call = await aSandboxWith('refusals', 'touch a.ts');
    const extglob = await call('glob', { pattern: '@(a|b).ts' });
    expect(extglob.isError).toBe(true);
    expect(textOf(extglob)).toBe(
      'INVALID_ARGUMENTS: arguments.pattern: extglobs such as "@(…)" are not supported; use braces ("{a,b}"), or write "\\(" to match a parenthesis',
    );
    const range = await call('glob', { pattern: 'file{1..3}.ts' });
    expect(textOf(range)).toBe(
      'INVALID_ARGUMENTS: arguments.pattern: brace ranges such as "{1..3}" are not supported; list the alternatives ("{1,2,3}")',
    );
    expect((await call('glob', { pattern: '{a,b}.ts' })).structuredContent).toEqual({
      files: ['a.ts'],
      truncated: false,
    });
  });
});
