import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAddressAllowed } from '@aileron/net';
import { compiledRunnerPath, LocalSandboxDriver, type SandboxSpec } from '@aileron/sandboxes';
import { aToken, aWorkspace } from '../support/builders';
import { startApiControlPlane, type TestControlPlane } from '../support/control-plane';
import { agentOn } from './box';

/** Global unicast (IANA gives 11.0.0.0/8 to the US DoD, not routed on the internet): a "public" server the test owns. */
const PUBLIC = '11.22.33.44';
/** a private and a link-local address on the same remote machine: the host reaches them, an egress sandbox must not */
const PRIVATE = '10.77.0.1';
const LINK_LOCAL = '169.254.77.1';
/** an address of the control plane's own machine (on the test's link), global unicast too */
const HOST_ADDRESS = '11.22.33.55';
const METADATA = '169.254.169.254';
const PORT = 8080;

/**
 * Fetches `url` from inside the sandbox: `reached <status> <body>`, or
 * `refused <code>` (EACCES: the namespace's rules prohibit the address;
 * ECONNREFUSED: nothing listens there, as on the namespace's own loopback).
 */
const probe = (url: string) =>
  `node -e "require('http').get(process.argv[1], { timeout: 5000 }, (r) => { let b = ''; r.on('data', (c) => (b += c)); r.on('end', () => console.log('reached', r.statusCode, b)); }).on('timeout', function () { console.log('timeout'); this.destroy(); }).on('error', (e) => console.log('refused', e.code))" ${url}`;

/**
 * Another machine on this host's link, made for the test: a network
 * namespace joined to the host by a veth pair, holding PUBLIC, PRIVATE and
 * LINK_LOCAL and serving HTTP on each; the host's end holds HOST_ADDRESS.
 * Everything goes with the namespace's one process.
 */
interface RemoteMachine {
  close(): void;
}

async function aRemoteMachine(): Promise<RemoteMachine> {
  const tag = randomBytes(3).toString('hex');
  const hostEnd = `aeg${tag}h`;
  const remoteEnd = `aeg${tag}r`;
  const server = `
    const lines = require('readline').createInterface({ input: process.stdin });
    console.log('namespace');
    lines.once('line', () => require('http').createServer((req, res) => res.end('remote ' + req.socket.localAddress)).listen(${PORT}, '0.0.0.0', () => console.log('listening')));
    lines.once('close', () => process.exit(0));`;
  const remote = spawn('unshare', ['--net', '--', process.execPath, '-e', server], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const said = lines(remote);
  expect(await said()).toBe('namespace');
  const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const inRemote = (...args: string[]) =>
    execFileSync('nsenter', [`--net=/proc/${remote.pid}/ns/net`, 'ip', ...args], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  ip('link', 'add', hostEnd, 'type', 'veth', 'peer', 'name', remoteEnd, 'netns', String(remote.pid));
  inRemote('link', 'set', 'lo', 'up');
  inRemote('link', 'set', remoteEnd, 'up');
  for (const address of [PUBLIC, PRIVATE, LINK_LOCAL]) inRemote('address', 'add', `${address}/32`, 'dev', remoteEnd);
  inRemote('route', 'add', 'default', 'dev', remoteEnd);
  ip('link', 'set', hostEnd, 'up');
  ip('address', 'add', `${HOST_ADDRESS}/32`, 'dev', hostEnd);
  for (const address of [PUBLIC, PRIVATE, LINK_LOCAL]) ip('route', 'add', `${address}/32`, 'dev', hostEnd);
  remote.stdin!.write('go\n');
  expect(await said()).toBe('listening');
  return {
    close() {
      remote.stdin!.end();
      remote.kill('SIGKILL');
      // gone with the namespace already, unless the process outlived the test
      try {
        execFileSync('ip', ['link', 'del', hostEnd], { stdio: 'ignore' });
      } catch {
        // gone
      }
    },
  };
}

/** The next line a process prints. */
function lines(child: ChildProcess): () => Promise<string> {
  const reader = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  return async () => {
    const next = await reader.next();
    if (next.done) throw new Error('the process ended');
    return next.value;
  };
}

async function listenOn(address: string, answer: string): Promise<Server> {
  const server = createServer((_req, res) => res.end(answer));
  await new Promise<void>((resolveListen) => server.listen(0, address, resolveListen));
  return server;
}

function urlOf(server: Server): string {
  const { address, port } = server.address() as AddressInfo;
  return `http://${address}:${port}/`;
}

describe('egress sandboxes (embedded, bubblewrap, pasta)', () => {
  let cp: TestControlPlane;
  let remote: RemoteMachine;
  let onHost: Server;
  let ws: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    remote = await aRemoteMachine();
    onHost = await listenOn(HOST_ADDRESS, 'the control plane machine');
    cp = await startApiControlPlane({
      AILERON_SANDBOX_EGRESS: 'admins',
      AILERON_POOL_APPROVAL_WAIT_SECONDS: '0',
    });
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    await cp.request('PUT', `/v1/workspaces/${ws}/policy`, { body: { default: 'allow', rules: [] } });
  }, 120_000);

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await cp?.close();
    onHost?.closeAllConnections();
    await new Promise((resolveClose) => (onHost ? onHost.close(resolveClose) : resolveClose(undefined)));
    remote?.close();
  });

  /** `bash` in the sandbox `name`, through an agent session, as the tools run it. */
  async function bashIn(name: string): Promise<(command: string) => Promise<string>> {
    const { bash } = await agentOn(cp, ws, name, clients);
    return async (command) => (await bash(command)).stdout.trim();
  }

  it('reaches a public address, and neither the control plane on loopback, nor the host, nor private, link-local or metadata addresses', async () => {
    // the test's addresses are what the pool's outbound rules call public and private
    expect(isAddressAllowed(PUBLIC, { allowCidrs: [], allowLoopback: false })).toEqual({ ok: true });
    expect(isAddressAllowed(HOST_ADDRESS, { allowCidrs: [], allowLoopback: false })).toEqual({ ok: true });
    // the host reaches every one of them: a refusal inside is the sandbox's rules, not the fixture
    for (const address of [PUBLIC, PRIVATE, LINK_LOCAL])
      expect(await (await fetch(`http://${address}:${PORT}/`)).text()).toBe(`remote ${address}`);
    expect(await (await fetch(urlOf(onHost))).text()).toBe('the control plane machine');

    const made = await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, {
      body: { name: 'online', network: 'egress' },
    });
    expect(made.status, made.text).toBe(201);
    expect(made.body.network).toBe('egress');
    const bash = await bashIn('online');

    expect(await bash(probe(`http://${PUBLIC}:${PORT}/`))).toBe(`reached 200 remote ${PUBLIC}`);
    // the namespace's loopback is its own: the control plane is not there
    expect(await bash(probe(`${cp.url}/v1/me`))).toBe('refused ECONNREFUSED');
    expect(await bash(probe(urlOf(onHost)))).toBe('refused EACCES');
    expect(await bash(probe(`http://${PRIVATE}:${PORT}/`))).toBe('refused EACCES');
    expect(await bash(probe(`http://${LINK_LOCAL}:${PORT}/`))).toBe('refused EACCES');
    expect(await bash(probe(`http://${METADATA}/latest/meta-data/`))).toBe('refused EACCES');
    // nothing in the sandbox can lift the rules: no capability over the namespace
    expect(
      await bash('ip rule del pref 130 to 10.0.0.0/8 2>&1; ip rule add pref 1 to 10.0.0.0/8 lookup main 2>&1'),
    ).toBe('RTNETLINK answers: Operation not permitted\nRTNETLINK answers: Operation not permitted');
    expect(await bash(probe(`http://${PRIVATE}:${PORT}/`))).toBe('refused EACCES');
  });

  it("a member may not make an egress sandbox (403 SANDBOX_EGRESS_FORBIDDEN, nothing made); an admin may; a member's network none stays open to members", async () => {
    const member = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws });
    const refused = await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, {
      token: member.token,
      body: { name: 'members-online', network: 'egress' },
    });
    expect(refused.status, refused.text).toBe(403);
    expect(refused.headers.get('content-type')).toContain('application/problem+json');
    expect(refused.body).toMatchObject({
      code: 'SANDBOX_EGRESS_FORBIDDEN',
      detail: expect.stringContaining('Role "member" may not make a sandbox with network "egress"'),
    });
    expect((await cp.request('GET', `/v1/workspaces/${ws}/sandboxes/members-online`)).status).toBe(404);

    expect(
      (
        await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, {
          token: member.token,
          body: { name: 'members-offline' },
        })
      ).status,
    ).toBe(201);
    const admin = await aToken(cp, cp.ownerToken, { role: 'admin', workspace: ws });
    const allowed = await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, {
      token: admin.token,
      body: { name: 'admins-online', network: 'egress' },
    });
    expect(allowed.status, allowed.text).toBe(201);
  });
});

describe('with AILERON_SANDBOX_EGRESS off (the default)', () => {
  let cp: TestControlPlane;
  let ws: string;

  beforeAll(async () => {
    cp = await startApiControlPlane();
    ws = (await aWorkspace(cp, cp.ownerToken)).slug;
  }, 120_000);

  afterAll(async () => {
    await cp?.close();
  });

  it('nobody makes an egress sandbox, not even the owner (403 SANDBOX_EGRESS_DISABLED); network none is made as before', async () => {
    const refused = await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, {
      body: { name: 'online', network: 'egress' },
    });
    expect(refused.status, refused.text).toBe(403);
    expect(refused.body).toMatchObject({
      code: 'SANDBOX_EGRESS_DISABLED',
      detail: expect.stringContaining('AILERON_SANDBOX_EGRESS=off'),
    });
    expect((await cp.request('GET', `/v1/workspaces/${ws}/sandboxes`)).body.sandboxes).toEqual([]);
    expect((await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, { body: { name: 'offline' } })).status).toBe(
      201,
    );
  });
});

describe('the local driver with egress', () => {
  let dir: string;
  let remote: RemoteMachine;
  const drivers: LocalSandboxDriver[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'aileron-egress-'));
    remote = await aRemoteMachine();
  });

  afterAll(async () => {
    for (const driver of drivers) await driver.close();
    remote?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function aDriver(egress: ConstructorParameters<typeof LocalSandboxDriver>[0]['egress']): LocalSandboxDriver {
    const driver = new LocalSandboxDriver({
      stateDir: join(dir, randomUUID()),
      runnerScript: compiledRunnerPath(),
      egress,
      log: () => undefined,
    });
    drivers.push(driver);
    return driver;
  }

  const anEgressSandbox = (): SandboxSpec => ({
    id: randomUUID(),
    organizationId: randomUUID(),
    workspaceId: randomUUID(),
    name: 'egress',
    network: 'egress',
    limits: {},
  });

  async function run(driver: LocalSandboxDriver, spec: SandboxSpec, command: string): Promise<string> {
    const runner = await driver.runner(spec);
    return (await runner.call({ op: 'exec', command, workdir: '/src', timeoutMs: 20_000, limits: {} })).stdout.trim();
  }

  it('lets the pool’s allowed ranges through (AILERON_POOL_EGRESS_ALLOW_CIDRS), and nothing else that is private', async () => {
    const driver = aDriver({ allowCidrs: ['10.77.0.0/24'] });
    const spec = anEgressSandbox();
    expect(await run(driver, spec, probe(`http://${PRIVATE}:${PORT}/`))).toBe(`reached 200 remote ${PRIVATE}`);
    expect(await run(driver, spec, probe(`http://${LINK_LOCAL}:${PORT}/`))).toBe('refused EACCES');
    expect(await run(driver, spec, probe(`http://${PUBLIC}:${PORT}/`))).toBe(`reached 200 remote ${PUBLIC}`);
  });

  it('without pasta an egress sandbox does not start, saying why, and never falls back to the host’s network', async () => {
    const driver = aDriver({ pastaPath: join(dir, 'no-pasta') });
    const error = await driver.runner(anEgressSandbox()).then(
      () => null,
      (failure: Error) => failure,
    );
    expect(error?.message).toBe(
      `network egress needs pasta (${join(dir, 'no-pasta')}, Debian package passt), which is not installed; an egress sandbox never uses the host's network instead`,
    );
    // a sandbox without network does not need it
    expect(await run(driver, { ...anEgressSandbox(), network: 'none' }, 'echo fine')).toBe('fine');
  });
});
