import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { connect as connectSocket } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HOST_UID_COUNT, processesOfUser } from '@aileron/bubblewrap';
import { eventually } from '../../../../../test/support/eventually';
import { compiledBridgePath, ensureBridgeBuilt } from '../../bridge/compiled-bridge';
import { InProcessTransport } from '../../proxy/in-process-transport';
import { InstanceStartError, type InProcessEndpoint, type InstanceSpec, type RunningInstance } from '../driver';
import { LocalDriver, type LocalDriverOptions } from './local-driver';

const root = resolve(__dirname, '../../../../..');
const bridgeScript = compiledBridgePath();
const serverBin = (name: 'everything' | 'memory' | 'filesystem') =>
  join(root, 'node_modules/@modelcontextprotocol', `server-${name}`, 'dist/index.js');

// Under the project root, like the real data dir, but not under what the sandbox may read.
const scratch = join(root, '.tmp', `local-driver-${randomBytes(4).toString('hex')}`);
const stateDir = join(scratch, 'pool');
const dataDir = join(scratch, 'data');
const logLines: string[] = [];
const drivers: LocalDriver[] = [];
const clients: Client[] = [];

function driver(overrides: Partial<LocalDriverOptions> = {}): LocalDriver {
  const created = new LocalDriver({
    stateDir,
    sandbox: 'bubblewrap',
    bridgeScript,
    readOnlyPaths: [join(root, 'node_modules'), join(root, 'dist')],
    log: (line) => logLines.push(line),
    ...overrides,
  });
  drivers.push(created);
  return created;
}

const homeOf = (of: InstanceSpec) => join(stateDir, of.workspaceId, of.server, 'home');

function spec(overrides: Partial<InstanceSpec> = {}): InstanceSpec {
  const suffix = randomBytes(4).toString('hex');
  return {
    id: `everything-${suffix}`,
    organizationId: 'org-1',
    organizationSlug: 'acme',
    workspaceId: `ws-${suffix}`,
    workspaceSlug: 'payments',
    server: 'everything',
    version: '2026.8.31',
    run: { kind: 'command', command: 'node', args: [serverBin('everything')] },
    env: {},
    secrets: [],
    limits: { memoryMb: 512, cpuMillis: 500 },
    ...overrides,
  };
}

type LocalInstance = RunningInstance<InProcessEndpoint>;

/** A client on a session of the instance, as the proxy's upstream session holds one: the other end is the child's stdio. */
async function connect(instance: LocalInstance): Promise<Client> {
  const [ours, theirs] = InProcessTransport.pair();
  await instance.endpoint.attach(theirs);
  const client = new Client({ name: 'local-driver-spec', version: '1.0.0' });
  clients.push(client);
  await client.connect(ours);
  return client;
}

async function callText(client: Client, name: string, args: Record<string, unknown> = {}): Promise<string> {
  const result = await client.callTool({ name, arguments: args });
  const text = (result.content as Array<{ type: string; text?: string }>).map((part) => part.text ?? '').join('');
  if (result.isError) throw new Error(text);
  return text;
}

/** Every process below pid, as the host sees them (sandboxed or not). */
function descendants(pid: number): number[] {
  const found: number[] = [];
  const visit = (parent: number) => {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${parent}/task`);
    } catch {
      return;
    }
    for (const task of tasks) {
      let children = '';
      try {
        children = readFileSync(`/proc/${parent}/task/${task}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const child of children.split(' ').filter(Boolean).map(Number)) {
        found.push(child);
        visit(child);
      }
    }
  };
  visit(pid);
  return found;
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
}

/** The MCP server processes the bridge of this instance has spawned, one per session. */
const serverProcesses = (instance: LocalInstance, script: string) =>
  descendants(instance.pid!).filter((pid) => cmdline(pid).includes(script) && !cmdline(pid).includes('main.js'));

const alive = (pid: number) =>
  existsSync(`/proc/${pid}`) && !readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');

async function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`not within ${ms} ms`)), ms)),
  );
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Starts a long call and resolves once the server reported progress on it, so it is surely running. */
async function longCall(client: Client): Promise<{ call: Promise<unknown> }> {
  let started!: () => void;
  const running = new Promise<void>((resolveRunning) => (started = resolveRunning));
  const call = client.callTool(
    { name: 'trigger-long-running-operation', arguments: { duration: 30, steps: 60 } },
    undefined,
    { onprogress: () => started(), timeout: 60_000 },
  );
  call.catch(() => {});
  await running;
  return { call };
}

beforeAll(() => {
  ensureBridgeBuilt();
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(join(dataDir, 'aileron.db'), 'control plane data');
});

afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close().catch(() => {})));
});

afterAll(async () => {
  await Promise.all(drivers.map((d) => d.close()));
  rmSync(scratch, { recursive: true, force: true });
});

describe('LocalDriver with bubblewrap', () => {
  it("serves a stdio server to the control plane alone: each session is a child of its own on the instance's socket, which is the instance user's and takes only the sessions asked for", async () => {
    const served = spec();
    const instance = await driver().start(served);
    const client = await connect(instance);
    const tools = (await client.listTools()).tools.map((tool) => tool.name);
    expect(tools).toEqual(expect.arrayContaining(['echo', 'get-env', 'trigger-long-running-operation']));
    expect(await callText(client, 'echo', { message: 'over stdio' })).toBe('Echo: over stdio');
    expect(await instance.healthy()).toBe(true);

    const run = join(stateDir, served.workspaceId, served.server, `run-${served.id}`);
    const socket = join(run, 'sessions.sock');
    const [uid] = descendants(instance.pid!).map((pid) =>
      Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]),
    );
    expect(statSync(run).uid).toBe(uid);
    expect(statSync(run).mode & 0o777).toBe(0o700);
    expect(statSync(socket).uid).toBe(uid);
    expect(statSync(socket).mode & 0o777).toBe(0o600);

    // a connection that says a tag nobody asked for (or none) is closed, and starts nothing
    const dir = openSync(run, 'r'); // the socket's path is longer than a socket address may be
    for (const first of [`${'0'.repeat(32)}\n`, 'hello\n', '{"jsonrpc":"2.0","id":1,"method":"ping"}\n']) {
      const closed = await new Promise<string>((resolveClosed) => {
        const stranger = connectSocket(`/proc/self/fd/${dir}/sessions.sock`);
        let heard = '';
        stranger.on('data', (chunk) => (heard += chunk.toString()));
        stranger.on('error', () => undefined);
        stranger.on('close', () => resolveClosed(heard));
        stranger.write(first);
      });
      expect(closed).toBe('');
    }
    closeSync(dir);
    // the refused attempts spawned nothing: still the one server process of the one session
    expect(serverProcesses(instance, serverBin('everything'))).toHaveLength(1);
    expect(await callText(client, 'echo', { message: 'still here' })).toBe('Echo: still here');
  });

  it('calls sent together (one write to the child) each get their own answer, in any order they finish', async () => {
    const client = await connect(await driver().start(spec()));
    const messages = Array.from({ length: 40 }, (_, i) => `together ${i} ${'x'.repeat(i * 500)}`);
    const answers = await Promise.all(messages.map((message) => callText(client, 'echo', { message })));
    expect(answers).toEqual(messages.map((message) => `Echo: ${message}`));
  });

  it('gives the server only its own environment: no bridge secret, nothing of the control plane', async () => {
    const canary = `canary-${randomBytes(8).toString('hex')}`;
    process.env.AILERON_SPEC_CANARY = canary;
    try {
      const instance = await driver().start(spec({ env: { GREETING: 'hello', API_KEY: 'k-123' }, secrets: ['k-123'] }));
      const env = JSON.parse(await callText(await connect(instance), 'get-env')) as Record<string, string>;
      // PWD is bubblewrap's own, from --chdir
      expect(env).toEqual({
        PATH: '/usr/local/bin:/usr/bin:/bin',
        HOME: '/home/mcp',
        TMPDIR: '/tmp',
        PWD: '/home/mcp',
        GREETING: 'hello',
        API_KEY: 'k-123',
      });
      // nor on any command line of the instance, which every local user can read
      for (const pid of [instance.pid!, ...descendants(instance.pid!)])
        expect(cmdline(pid)).not.toMatch(/k-123|Bearer|canary/);
    } finally {
      delete process.env.AILERON_SPEC_CANARY;
    }
  });

  /**
   * The security review's attack: an org admin's catalog entry sets
   * LD_PRELOAD to a library a first version of the server wrote into its
   * persistent home (whose host path the sandbox can read in
   * /proc/self/mountinfo). bwrap starts on the host, so before the fix the
   * loader ran that library there, as the control plane's user.
   */
  it("an entry's LD_PRELOAD or LD_AUDIT never reaches a program on the host: the start is refused and the marker never appears", async () => {
    const first = spec();
    const local = driver();
    await (await local.start(first)).stop();
    const home = homeOf(first);
    const marker = join(scratch, `pwned-${randomBytes(4).toString('hex')}`);
    const source = join(scratch, 'evil.c');
    writeFileSync(
      source,
      `#include <fcntl.h>\n#include <unistd.h>\n__attribute__((constructor)) static void pwn(void) { int fd = open("${marker}", O_CREAT | O_WRONLY, 0644); if (fd >= 0) close(fd); }\nunsigned int la_version(unsigned int v) { return v; }\n`,
    );
    // what the first version of the server left in its home
    execFileSync('cc', ['-shared', '-fPIC', '-o', join(home, 'evil.so'), source]);
    for (const name of ['LD_PRELOAD', 'LD_AUDIT']) {
      const attack = spec({ workspaceId: first.workspaceId, env: { [name]: join(home, 'evil.so') } });
      const refusal = await local.start(attack).then(
        (instance) => instance.stop().then(() => null),
        (error: unknown) => error,
      );
      expect(existsSync(marker), `${name} ran the library on the host`).toBe(false);
      expect(refusal).toBeInstanceOf(InstanceStartError);
      expect((refusal as Error).message).toMatch(new RegExp(`${name} is not allowed`));
    }
  });

  it("starts bwrap with a fixed environment of ours: the entry's variables reach only the server inside, and no command line", async () => {
    const instance = await driver().start(spec({ env: { GREETING: 'hello', API_KEY: 'k-123' }, secrets: ['k-123'] }));
    const environ = readFileSync(`/proc/${instance.pid!}/environ`, 'utf8').split('\0').filter(Boolean);
    expect(environ).toEqual(['PATH=/usr/local/bin:/usr/bin:/bin']);
    expect(cmdline(instance.pid!)).not.toMatch(/k-123|hello|Bearer/);
    const env = JSON.parse(await callText(await connect(instance), 'get-env')) as Record<string, string>;
    expect(env).toMatchObject({ GREETING: 'hello', API_KEY: 'k-123' });
  });

  it("cannot see the control plane's data, other tenants' homes or write outside its home", async () => {
    const local = driver();
    // the server itself would allow all of "/": only the sandbox stands in the way
    const filesystem = () =>
      spec({ server: 'filesystem', run: { kind: 'command', command: 'node', args: [serverBin('filesystem'), '/'] } });
    const neighbour = filesystem();
    await local.start(neighbour);
    writeFileSync(join(homeOf(neighbour), 'private.txt'), 'neighbour');
    const mine = filesystem();
    const instance = await local.start(mine);
    const client = await connect(instance);

    const packageJson = join(root, 'node_modules/@modelcontextprotocol/server-filesystem/package.json');
    expect(await callText(client, 'read_text_file', { path: packageJson })).toContain(
      '"name": "@modelcontextprotocol/server-filesystem"',
    );
    await expect(callText(client, 'read_text_file', { path: join(dataDir, 'aileron.db') })).rejects.toThrow();
    await expect(callText(client, 'list_directory', { path: stateDir })).rejects.toThrow();
    expect((await callText(client, 'list_directory', { path: root })).split('\n').sort()).toEqual([
      '[DIR] dist',
      '[DIR] node_modules',
    ]);

    await callText(client, 'write_file', { path: '/home/mcp/notes.txt', content: 'mine' });
    expect(readFileSync(join(homeOf(mine), 'notes.txt'), 'utf8')).toBe('mine');
    expect(statSync(homeOf(mine)).mode & 0o777).toBe(0o700);
    await expect(
      callText(client, 'write_file', { path: join(root, 'node_modules/planted.js'), content: 'x' }),
    ).rejects.toThrow(/read-only/i);
    expect(existsSync(join(root, 'node_modules/planted.js'))).toBe(false);
    await expect(callText(client, 'list_directory', { path: '/home' })).resolves.toBe('[DIR] mcp');
    expect(await callText(client, 'list_directory', { path: '/home/mcp' })).not.toContain('private.txt');
  });

  it('a session whose server process dies gets a clear error at once; other sessions and new ones go on', async () => {
    const instance = await driver().start(spec());
    const first = await connect(instance);
    const [firstPid] = serverProcesses(instance, serverBin('everything'));
    const second = await connect(instance);
    const pids = serverProcesses(instance, serverBin('everything'));
    expect(pids).toHaveLength(2);
    const secondPid = pids.find((pid) => pid !== firstPid)!;

    const { call } = await longCall(first);
    process.kill(firstPid!, 'SIGKILL');
    // a hang guard far under the call's 30 s: it fails with the process, not at its end
    await expect(within(5_000, call)).rejects.toThrow('the MCP server process exited (SIGKILL)');
    // the dead session is gone; the client must start a new one
    await expect(first.listTools()).rejects.toThrow(/Not connected/);

    expect(await callText(second, 'echo', { message: 'still here' })).toBe('Echo: still here');
    const third = await connect(instance);
    expect(await callText(third, 'echo', { message: 'new session' })).toBe('Echo: new session');
    expect(alive(secondPid)).toBe(true);
  });

  it('SIGKILL of the instance ends it with everything it ran, and its calls break at once', async () => {
    const instance = await driver().start(spec());
    const client = await connect(instance);
    const disconnected = new Promise<void>((resolveClosed) => (client.onclose = resolveClosed));
    const { call } = await longCall(client);
    const inside = descendants(instance.pid!);
    expect(inside.length).toBeGreaterThanOrEqual(2); // the bridge and the server at least

    process.kill(instance.pid!, 'SIGKILL');
    expect(await within(5_000, instance.exited)).toEqual({ reason: 'killed by SIGKILL', requested: false });
    expect(inside.filter(alive)).toEqual([]);
    await within(5_000, disconnected);
    expect(await instance.healthy()).toBe(false);
    void call;
  });

  it("scrubs the spec's secrets from everything the instance prints", async () => {
    const secret = `s3cr3t-${randomBytes(12).toString('hex')}`;
    const script = `console.error('connecting with ' + process.env.API_KEY + ' and ' + process.env.PLAIN); import(${JSON.stringify(serverBin('everything'))})`;
    const instance = await driver().start(
      spec({
        run: { kind: 'command', command: 'node', args: ['-e', script] },
        env: { API_KEY: secret, PLAIN: 'visible' },
        secrets: [secret],
      }),
    );
    await connect(instance); // the server process starts with the first session
    const line = logLines.find((candidate) => candidate.includes('connecting with'));
    expect(line).toBe(`[${instance.id}] connecting with [redacted] and visible`);
    expect(logLines.filter((candidate) => candidate.includes(secret))).toEqual([]);
  });

  it('keeps the home of a (workspace, server) across restarts, but /tmp is new each start', async () => {
    const local = driver();
    const memory = spec({
      server: 'memory',
      run: { kind: 'command', command: 'node', args: [serverBin('memory')] },
      env: { MEMORY_FILE_PATH: '/home/mcp/memory.jsonl' },
    });
    const entity = { name: 'Aileron', entityType: 'product', observations: ['an MCP gateway'] };

    let instance = await local.start(memory);
    await callText(await connect(instance), 'create_entities', { entities: [entity] });
    await instance.stop();

    instance = await local.start({ ...memory, id: `memory-${randomBytes(4).toString('hex')}` });
    expect(JSON.parse(await callText(await connect(instance), 'read_graph')).entities).toEqual([entity]);
    // another workspace's instance of the same server starts empty
    const other = await local.start(
      spec({ ...memory, id: `memory-${randomBytes(4).toString('hex')}`, workspaceId: 'ws-other' }),
    );
    expect(JSON.parse(await callText(await connect(other), 'read_graph')).entities).toEqual([]);

    const files = spec({
      server: 'files',
      run: { kind: 'command', command: 'node', args: [serverBin('filesystem'), '/home/mcp', '/tmp'] },
    });
    let filesInstance = await local.start(files);
    let client = await connect(filesInstance);
    await callText(client, 'write_file', { path: '/tmp/scratch.txt', content: 'temporary' });
    await callText(client, 'write_file', { path: '/home/mcp/kept.txt', content: 'kept' });
    await filesInstance.stop();
    filesInstance = await local.start({ ...files, id: `files-${randomBytes(4).toString('hex')}` });
    client = await connect(filesInstance);
    expect(await callText(client, 'read_text_file', { path: '/home/mcp/kept.txt' })).toBe('kept');
    await expect(callText(client, 'read_text_file', { path: '/tmp/scratch.txt' })).rejects.toThrow();
  });

  it('stop ends the instance and its servers, resolves for every caller, and marks the exit as asked for', async () => {
    const instance = await driver().start(spec());
    await connect(instance);
    const inside = descendants(instance.pid!);
    await Promise.all([instance.stop(), instance.stop()]);
    await instance.stop();
    expect(await instance.exited).toEqual({ reason: 'exited with code 0', requested: true });
    expect([instance.pid!, ...inside].filter(alive)).toEqual([]);
    expect(await instance.healthy()).toBe(false);
  });

  it('refuses what it cannot run, with reasons fit for a user', async () => {
    await expect(
      driver().start(spec({ run: { kind: 'image', image: 'ghcr.io/acme/mcp:1', args: [] } })),
    ).rejects.toThrow(new InstanceStartError('images need the kubernetes pool driver'));
    await expect(driver({ bwrapPath: join(scratch, 'no-bwrap') }).start(spec())).rejects.toThrow(
      /AILERON_POOL_SANDBOX/,
    );
    await expect(driver().start(spec({ workspaceId: '../escape' }))).rejects.toBeInstanceOf(InstanceStartError);

    const slow = driver({ startTimeoutMs: 30 });
    const before = new Set(descendants(process.pid));
    await expect(slow.start(spec({ env: { API_KEY: 'k-slow' }, secrets: ['k-slow'] }))).rejects.toThrow(
      new InstanceStartError('the instance did not become ready within 30 ms'),
    );
    await eventually(
      'no process of the failed start left',
      () => descendants(process.pid).filter((pid) => !before.has(pid) && alive(pid)).length === 0,
    );

    const failing = join(scratch, 'failing-bridge.js');
    writeFileSync(failing, 'process.exit(3)');
    await expect(driver({ bridgeScript: failing }).start(spec({ env: { API_KEY: 'k-fail' } }))).rejects.toThrow(
      new InstanceStartError('the instance ended before it was ready: exited with code 3'),
    );
  });

  it('a command that cannot be run fails the session that needs it, clearly', async () => {
    const instance = await driver().start(
      spec({ run: { kind: 'command', command: '/usr/bin/no-such-mcp-server', args: [] } }),
    );
    await expect(connect(instance)).rejects.toThrow(/could not be started \(ENOENT\)/);
    expect(await instance.healthy()).toBe(true);
  });
});

/**
 * A package as the registry would hand it to npm (package/…, with a bin), of a
 * stdio MCP server that needs nothing but node: its tarball is put in the
 * instance's home, where npm inside the sandbox can install it without a
 * network.
 */
function packagedServer(home: string): string {
  const dir = join(scratch, `package-${randomBytes(4).toString('hex')}`, 'package');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: 'packaged-echo', version: '1.0.0', bin: { 'packaged-echo': 'server.js' } }),
  );
  writeFileSync(
    join(dir, 'server.js'),
    `#!/usr/bin/env node
const send = (message) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...message }) + '\\n');
require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
  const { id, method, params } = JSON.parse(line);
  if (id === undefined) return;
  if (method === 'initialize')
    send({ id, result: { protocolVersion: params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'packaged-echo', version: '1.0.0' } } });
  else if (method === 'tools/list') send({ id, result: { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] } });
  else if (method === 'tools/call') send({ id, result: { content: [{ type: 'text', text: 'packaged: ' + params.arguments.message }] } });
  else send({ id, error: { code: -32601, message: 'Method not found' } });
});
`,
  );
  mkdirSync(home, { recursive: true });
  execFileSync('tar', ['-czf', join(home, 'packaged-echo-1.0.0.tgz'), '-C', dirname(dir), 'package']);
  return '/home/mcp/packaged-echo-1.0.0.tgz';
}

/**
 * The command lines of what the bridge of the instance at pid runs (servers, and npm or npx where
 * they run), without bwrap and the bridge, whose own command lines name the catalog command.
 */
const startedBy = (pid: number) =>
  descendants(pid)
    .map((pid) => cmdline(pid).trim())
    .filter((line) => line !== '' && !line.includes('bwrap') && !line.includes('main.js'));

/** Runs `action` while watching what the bridge of the instance at pid runs; resolves with every command line seen. */
async function watchingTree(pid: number, action: () => Promise<unknown>): Promise<string[]> {
  const seen = new Set<string>();
  const look = () => {
    for (const line of startedBy(pid)) seen.add(line);
  };
  const timer = setInterval(look, 2);
  try {
    await action();
    look();
  } finally {
    clearInterval(timer);
  }
  return [...seen];
}

describe('LocalDriver with an npx catalog command', () => {
  it('installs the package once and starts each session as node and its program: no npm for a second session, none left running', async () => {
    const packaged = spec({ server: 'packaged' });
    const tarball = packagedServer(homeOf(packaged));
    const instance = await driver().start({
      ...packaged,
      run: { kind: 'command', command: 'npx', args: ['-y', tarball] },
    });
    const first = await connect(instance);
    expect(await callText(first, 'echo', { message: 'one' })).toBe('packaged: one');
    const installed = logLines.filter((line) => line.startsWith(`[${instance.id}]`) && line.includes(' runs '));
    expect(installed).toEqual([
      expect.stringMatching(
        /: runs \/home\/mcp\/\.cache\/aileron\/packages\/[0-9a-f]{16}\/node_modules\/packaged-echo\/server\.js \(installed in \d+ ms\)$/,
      ),
    ]);
    const program = /runs (\S+)/.exec(installed[0]!)![1]!;

    const seen = await watchingTree(instance.pid!, async () => {
      const second = await connect(instance);
      expect(await callText(second, 'echo', { message: 'two' })).toBe('packaged: two');
    });
    // the second session's start ran its server alone: no npm, no npx, no shell around it
    expect(seen.filter((line) => !line.includes(program))).toEqual([]);
    expect(startedBy(instance.pid!)).toEqual([
      `${realpathSync(process.execPath)} ${program}`,
      `${realpathSync(process.execPath)} ${program}`,
    ]);
  });
});

/**
 * The security review's finding 1b, in the pool: a control plane running as
 * root started bwrap as root, so every tenant's server ran as host uid 0
 * behind a user namespace: it owned root's files (a 0600 file of root's that
 * the sandbox can see was readable) and was exempt from RLIMIT_NPROC.
 */
describe('LocalDriver of a root control plane', () => {
  const BASE = 1_879_400_000;
  // a directory the sandbox may read, as node_modules: root's 0600 file there stays root's
  const hostFiles = join(scratch, 'host-files');
  const rootOnly = join(hostFiles, 'root-only.txt');
  const probeScript = join(hostFiles, 'probe.js');
  const sdk = (module: string) => join(root, 'node_modules/@modelcontextprotocol/sdk/dist/cjs/server', module);

  beforeAll(() => {
    expect(process.getuid?.(), 'these tests are about a control plane running as root').toBe(0);
    mkdirSync(hostFiles, { recursive: true });
    writeFileSync(rootOnly, 'root only\n');
    chmodSync(rootOnly, 0o600);
    // what the server sees of itself: its uid and user, and what it may read and write
    writeFileSync(
      probeScript,
      `const fs = require('node:fs');
const { McpServer } = require(${JSON.stringify(sdk('mcp.js'))});
const { StdioServerTransport } = require(${JSON.stringify(sdk('stdio.js'))});
const attempt = (act) => { try { act(); return 'ok'; } catch (error) { return error.code; } };
const server = new McpServer({ name: 'probe', version: '1.0.0' });
server.registerTool('probe', {}, async () => ({ content: [{ type: 'text', text: JSON.stringify({
  uid: process.getuid(),
  user: require('node:os').userInfo(),
  reads: Object.fromEntries(process.env.PROBE_READS.split(':').map((path) => [path, attempt(() => fs.readFileSync(path))])),
  // opened for writing and closed: never written, so a failure of the sandbox changes nothing on the host
  sysctl: attempt(() => fs.closeSync(fs.openSync('/proc/sys/kernel/core_pattern', 'r+'))),
}) }] }));
server.connect(new StdioServerTransport());
`,
    );
  });

  const rootDriver = () =>
    driver({ uidBase: BASE, readOnlyPaths: [join(root, 'node_modules'), join(root, 'dist'), hostFiles] });
  const probe = (overrides: Partial<InstanceSpec> = {}) =>
    spec({
      server: 'probe',
      run: { kind: 'command', command: 'node', args: [probeScript] },
      env: { PROBE_READS: [rootOnly, '/home/mcp/before.txt'].join(':') },
      ...overrides,
    });
  /** the uids the host sees the instance's processes run as: bwrap, the bridge, the server */
  const hostUids = (instance: LocalInstance) =>
    [instance.pid!, ...descendants(instance.pid!)].map((pid) =>
      Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]),
    );

  interface Probed {
    uid: number;
    user: { uid: number; gid: number; username: string; homedir: string };
    reads: Record<string, string>;
    sysctl: string;
  }

  it("runs a server as a host uid of its own, never root: root's files and the kernel's settings are out of its reach, its home is its own", async () => {
    const first = probe();
    // a home from before (written as root): it is given to the instance with everything in it
    mkdirSync(homeOf(first), { recursive: true });
    writeFileSync(join(homeOf(first), 'before.txt'), 'kept', { mode: 0o600 });
    const instance = await rootDriver().start(first);
    const seen = JSON.parse(await callText(await connect(instance), 'probe')) as Probed;

    expect(seen.uid).toBeGreaterThanOrEqual(BASE);
    expect(seen.uid).toBeLessThan(BASE + HOST_UID_COUNT);
    // the uid inside is the host's, for bwrap, the bridge and the server alike, and /etc/passwd names it
    const uids = hostUids(instance);
    expect(uids.length).toBeGreaterThanOrEqual(3);
    expect(new Set(uids)).toEqual(new Set([seen.uid]));
    expect(seen.user).toMatchObject({ uid: seen.uid, gid: seen.uid, username: 'mcp', homedir: '/home/mcp' });
    expect(seen.reads).toEqual({ [rootOnly]: 'EACCES', '/home/mcp/before.txt': 'ok' });
    expect(['EACCES', 'EROFS']).toContain(seen.sysctl);
    expect(statSync(homeOf(first)).uid).toBe(seen.uid);
    expect(statSync(join(homeOf(first), 'before.txt')).uid).toBe(seen.uid);
    expect(statSync(rootOnly).uid).toBe(0);
  });

  it('gives two servers different uids, and a server its uid again when it restarts, from a new control plane too', async () => {
    const local = rootDriver();
    const uidOf = async (instance: LocalInstance) =>
      (JSON.parse(await callText(await connect(instance), 'probe')) as Probed).uid;
    const one = probe();
    const other = probe({ workspaceId: one.workspaceId, server: 'probe-two' });
    const first = await local.start(one);
    const uid = await uidOf(first);
    expect(await uidOf(await local.start(other))).not.toBe(uid);
    // another workspace's instance of the same server is another (workspace, server)
    expect(await uidOf(await local.start(probe({ server: one.server })))).not.toBe(uid);

    await first.stop();
    expect(await uidOf(await local.start({ ...one, id: `probe-${randomBytes(4).toString('hex')}` }))).toBe(uid);
    expect(await uidOf(await rootDriver().start({ ...one, id: `probe-${randomBytes(4).toString('hex')}` }))).toBe(uid);
  });

  it('stop, or a SIGKILL of the instance, leaves no process of its uid', async () => {
    const local = rootDriver();
    for (const end of [
      (instance: LocalInstance) => instance.stop(),
      (instance: LocalInstance) => process.kill(instance.pid!, 'SIGKILL'),
    ]) {
      const instance = await local.start(spec({ workspaceId: `ws-end-${randomBytes(4).toString('hex')}` }));
      const client = await connect(instance);
      await longCall(client);
      const [uid] = hostUids(instance);
      expect(uid).toBeGreaterThanOrEqual(BASE);
      expect(processesOfUser(uid!).length).toBeGreaterThanOrEqual(3);
      await end(instance);
      await within(5_000, instance.exited);
      expect(processesOfUser(uid!)).toEqual([]);
    }
  });
});

describe('LocalDriver without a sandbox', () => {
  it('runs the same bridge with the same clean environment, in the home, and SIGKILL still takes every process', async () => {
    const plain = spec({ env: { GREETING: 'hello' } });
    const instance = await driver({ sandbox: 'none' }).start(plain);
    const client = await connect(instance);
    const env = JSON.parse(await callText(client, 'get-env')) as Record<string, string>;
    expect(env).toEqual({
      PATH: '/usr/local/bin:/usr/bin:/bin',
      HOME: homeOf(plain),
      TMPDIR: join(homeOf(plain), '..', `tmp-${plain.id}`),
      GREETING: 'hello',
    });
    expect(existsSync(env.TMPDIR!)).toBe(true);

    await longCall(client);
    const inside = descendants(instance.pid!);
    expect(inside.length).toBeGreaterThanOrEqual(1);
    process.kill(instance.pid!, 'SIGKILL');
    expect(await within(5_000, instance.exited)).toEqual({ reason: 'killed by SIGKILL', requested: false });
    expect(inside.filter(alive)).toEqual([]);
    expect(existsSync(env.TMPDIR!)).toBe(false);
  });
});
