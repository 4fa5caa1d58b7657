import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureBridgeBuilt } from '@aileron/pool/bridge';
import { eventually } from '../../../test/support/eventually';

const root = resolve(__dirname, '../../..');
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
let bridgeScript = '';
const bridges: ChildProcess[] = [];

interface Bridge {
  process: ChildProcess;
  url: string;
  token: string;
  stderr: () => string;
}

async function startBridge(env: Record<string, string> = {}): Promise<Bridge> {
  const token = randomBytes(24).toString('base64url');
  const child = spawn(process.execPath, [bridgeScript, '--', process.execPath, everything], {
    env: { PATH: '/usr/bin:/bin', AILERON_BRIDGE_TOKEN: token, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  bridges.push(child);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const port = await new Promise<number>((resolvePort, reject) => {
    child.stdout!.once('data', (chunk: Buffer) =>
      resolvePort((JSON.parse(chunk.toString()) as { ready: { port: number } }).ready.port),
    );
    child.once('exit', (code) => reject(new Error(`bridge exited with ${code}: ${stderr}`)));
  });
  return { process: child, url: `http://127.0.0.1:${port}/mcp`, token, stderr: () => stderr };
}

type Message = {
  id?: string | number;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
};

/** The JSON-RPC messages of one SSE response, in order, as they arrive. */
class SseStream {
  private readonly seen: Message[] = [];
  private waiters: Array<() => void> = [];
  ended = false;

  constructor(response: Response) {
    void (async () => {
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const data = buffer
              .slice(0, end)
              .split('\n')
              .filter((line) => line.startsWith('data: '))
              .map((line) => line.slice(6))
              .join('\n');
            buffer = buffer.slice(end + 2);
            if (data) this.seen.push(JSON.parse(data) as Message);
            this.wake();
          }
        }
      } catch {
        // the connection went away; `ended` says so
      }
      this.ended = true;
      this.wake();
    })();
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }

  /** Resolves with the first message (from the start of the stream) that matches. */
  async next(matches: (message: Message) => boolean, timeoutMs = 10_000): Promise<Message> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.seen.find(matches);
      if (found) return found;
      if (this.ended) throw new Error(`stream ended without it; saw ${JSON.stringify(this.seen)}`);
      if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms; saw ${JSON.stringify(this.seen)}`);
      await new Promise<void>((wake) => {
        this.waiters.push(wake);
        setTimeout(wake, 50);
      });
    }
  }

  all(): Message[] {
    return [...this.seen];
  }
}

class Session {
  id = '';
  constructor(private readonly bridge: Bridge) {}

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return {
      authorization: `Bearer ${this.bridge.token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(this.id ? { 'mcp-session-id': this.id, 'mcp-protocol-version': '2025-11-25' } : {}),
      ...extra,
    };
  }

  post(message: Message): Promise<Response> {
    return fetch(this.bridge.url, {
      method: 'POST',
      headers: this.headers(),
      body: JSON.stringify({ jsonrpc: '2.0', ...message }),
    });
  }

  async call(message: Message): Promise<SseStream> {
    const response = await this.post(message);
    expect(response.status).toBe(200);
    return new SseStream(response);
  }

  /** Resolves with the session's GET stream, opened before `initialized` so nothing the server says then is lost. */
  async initialize(capabilities: Record<string, unknown> = {}): Promise<SseStream> {
    const response = await this.post({
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'bridge-spec', version: '1' } },
    });
    expect(response.status).toBe(200);
    this.id = response.headers.get('mcp-session-id')!;
    await new SseStream(response).next((message) => message.id === 0);
    const background = await this.listen();
    expect((await this.post({ method: 'notifications/initialized' })).status).toBe(202);
    return background;
  }

  async listen(): Promise<SseStream> {
    const response = await fetch(this.bridge.url, { headers: this.headers({ accept: 'text/event-stream' }) });
    expect(response.status).toBe(200);
    return new SseStream(response);
  }
}

/** The MCP server processes a bridge runs, one per session. */
function servers(bridge: Bridge): number[] {
  const tasks = readFileSync(`/proc/${bridge.process.pid}/task/${bridge.process.pid}/children`, 'utf8');
  return tasks.split(' ').filter(Boolean).map(Number);
}

/** Alive and not a zombie; a process that goes while we look is gone (its /proc entry vanishes between two reads). */
function running(pid: number): boolean {
  try {
    return !/^\S+ \(.*\) [ZX]/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

beforeAll(() => {
  bridgeScript = ensureBridgeBuilt();
});

afterEach(() => {
  for (const bridge of bridges.splice(0)) bridge.kill('SIGKILL');
});

describe('bridge', () => {
  it('sends progress and server-to-client requests on the stream of the call they belong to, list changes on the session stream', async () => {
    const bridge = await startBridge();
    const session = new Session(bridge);
    const background = await session.initialize({ sampling: {} });

    // the server registers its sampling tool once it knows the client can sample, and says so
    await background.next((message) => message.method === 'notifications/tools/list_changed');

    const progress = await session.call({
      id: 1,
      method: 'tools/call',
      params: {
        name: 'trigger-long-running-operation',
        arguments: { duration: 0.3, steps: 3 },
        _meta: { progressToken: 'p-1' },
      },
    });
    expect((await progress.next((message) => message.id === 1)).result).toMatchObject({
      content: [{ type: 'text', text: expect.stringContaining('Long running operation completed') }],
    });
    expect(
      progress
        .all()
        .filter((message) => message.method === 'notifications/progress')
        .map((message) => message.params),
    ).toEqual([
      { progress: 1, total: 3, progressToken: 'p-1' },
      { progress: 2, total: 3, progressToken: 'p-1' },
      { progress: 3, total: 3, progressToken: 'p-1' },
    ]);

    const sampling = await session.call({
      id: 2,
      method: 'tools/call',
      params: { name: 'trigger-sampling-request', arguments: { prompt: 'the answer?' } },
    });
    const request = await sampling.next((message) => message.method === 'sampling/createMessage');
    const answer = {
      jsonrpc: '2.0',
      id: request.id,
      result: { role: 'assistant', content: { type: 'text', text: 'forty-two' }, model: 'spec' },
    };
    expect(
      (await fetch(bridge.url, { method: 'POST', headers: session.headers(), body: JSON.stringify(answer) })).status,
    ).toBe(202);
    const result = await sampling.next((message) => message.id === 2);
    expect(JSON.stringify(result.result)).toContain('forty-two');
    expect(
      background
        .all()
        .some((message) => message.method === 'sampling/createMessage' || message.method === 'notifications/progress'),
    ).toBe(false);
  });

  it('DELETE ends the session and its server process; the session id is unknown afterwards', async () => {
    const bridge = await startBridge();
    const session = new Session(bridge);
    await session.initialize();
    const [server] = servers(bridge);
    expect(running(server!)).toBe(true);

    expect((await fetch(bridge.url, { method: 'DELETE', headers: session.headers() })).status).toBe(200);
    await eventually('the server process to end', () => !running(server!), { timeoutMs: 5_000 });
    const after = await session.post({ id: 5, method: 'tools/list' });
    expect(after.status).toBe(404);
    expect(await after.json()).toMatchObject({ error: { code: -32001, message: 'Session not found' } });
  });

  it('spawns a server only for an initialize, and never hands it the bearer secret', async () => {
    const bridge = await startBridge({ GREETING: 'hello' });
    const stray = await new Session(bridge).post({ id: 1, method: 'tools/list' });
    expect(stray.status).toBe(400);
    expect(servers(bridge)).toEqual([]);

    await new Session(bridge).initialize();
    const [server] = servers(bridge);
    const environ = readFileSync(`/proc/${server}/environ`, 'utf8').split('\0').filter(Boolean);
    expect(environ).toContain('GREETING=hello');
    expect(environ.some((entry) => entry.startsWith('AILERON_BRIDGE_TOKEN') || entry.includes(bridge.token))).toBe(
      false,
    );
  });

  it('a server that exits mid-call fails that call with its exit status, at once', async () => {
    const bridge = await startBridge();
    const session = new Session(bridge);
    await session.initialize();
    const call = await session.call({
      id: 3,
      method: 'tools/call',
      params: {
        name: 'trigger-long-running-operation',
        arguments: { duration: 30, steps: 30 },
        _meta: { progressToken: 'p' },
      },
    });
    await call.next((message) => message.method === 'notifications/progress', 5000);
    const [server] = servers(bridge);
    process.kill(server!, 'SIGTERM');
    // a hang guard far under the call's 30 s: it fails with the process, not at its end
    const failure = await call.next((message) => message.id === 3, 5_000);
    expect(failure.error).toEqual({ code: -32603, message: 'the MCP server process exited (SIGTERM)' });
    expect((await session.post({ id: 4, method: 'tools/list' })).status).toBe(404);
  });

  it('refuses to run without a secret, and on SIGTERM stops its servers and exits cleanly', async () => {
    const bare = spawn(process.execPath, [bridgeScript, '--', process.execPath, everything], {
      env: { PATH: '/usr/bin:/bin' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    bare.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    expect(await new Promise((resolveExit) => bare.once('exit', resolveExit))).toBe(2);
    expect(stderr).toContain('AILERON_BRIDGE_TOKEN');

    const bridge = await startBridge();
    await new Session(bridge).initialize();
    await new Session(bridge).initialize();
    const children = servers(bridge);
    expect(children).toHaveLength(2);
    bridge.process.kill('SIGTERM');
    expect(
      await new Promise((resolveExit) => bridge.process.once('exit', (code, signal) => resolveExit(signal ?? code))),
    ).toBe(0);
    await eventually('every server process to end', () => children.every((pid) => !running(pid)), { timeoutMs: 5_000 });
  });
});
