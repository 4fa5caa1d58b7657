import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import type { JSONRPCMessage, JSONRPCRequest, MessageExtraInfo } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BoundedEventStore } from './proxy/bounded-event-store';
import { NodeStreamableHttpTransport } from './node-streamable-http-transport';

const ACCEPT = 'application/json, text/event-stream';
const INITIALIZE = {
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
};

/** The SDK transport over node:http, with a server whose answers each test sends when it likes. */
describe('NodeStreamableHttpTransport', () => {
  let server: Server;
  let url: string;
  let transport: NodeStreamableHttpTransport;
  let received: JSONRPCRequest[];
  let waiting: ((request: JSONRPCRequest) => void)[];
  /** how the server hands an exchange to the transport; a test may take over the next one */
  let route: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;

  async function start(options: { eventStore?: boolean; directWithinMs?: number } = {}): Promise<string> {
    received = [];
    waiting = [];
    transport = new NodeStreamableHttpTransport({
      sessionIdGenerator: () => 'session-1',
      enableDnsRebindingProtection: true,
      allowedOrigins: ['http://console.example'],
      ...(options.eventStore ? { eventStore: new BoundedEventStore() } : {}),
      ...(options.directWithinMs !== undefined ? { directAnswers: { withinMs: options.directWithinMs } } : {}),
    });
    transport.onmessage = (message: JSONRPCMessage) => {
      if (!('method' in message && 'id' in message)) return;
      if (message.method === 'initialize') {
        void transport.send({
          jsonrpc: '2.0',
          id: message.id,
          result: { protocolVersion: '2025-11-25', capabilities: {}, serverInfo: { name: 's', version: '1' } },
        });
        return;
      }
      received.push(message);
      waiting.shift()?.(message);
    };
    route = undefined;
    server = createServer((req, res) => {
      if (route) return route(req, res);
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => void transport.handleRequest(req, res, body === '' ? undefined : JSON.parse(body)));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
    const init = await fetch(url, {
      method: 'POST',
      headers: { accept: ACCEPT, 'content-type': 'application/json' },
      body: JSON.stringify(INITIALIZE),
    });
    expect(init.status).toBe(200);
    expect(await init.text()).toContain('"serverInfo"');
    return init.headers.get('mcp-session-id')!;
  }

  /** Headers of a quiet stream must not wait for its first event (the SDK's keep-alive comes only after 15 s): 5 s tells the two apart. */
  const within = <T>(ms: number, promise: Promise<T>): Promise<T> =>
    Promise.race([
      promise,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref()),
    ]);
  /** The SDK allows one GET stream per session and refuses another (409) while the first is registered: ask again for up to a second. */
  async function getStreamOnceFree(headers: Record<string, string>): Promise<Response> {
    let response = await fetch(url, { headers });
    for (let i = 0; response.status === 409 && i < 50; i++) {
      await response.body?.cancel();
      await new Promise((r) => setTimeout(r, 20));
      response = await fetch(url, { headers });
    }
    return response;
  }
  const nextRequest = (): Promise<JSONRPCRequest> => new Promise((resolve) => waiting.push(resolve));
  const post = (
    session: string,
    message: unknown,
    extra: Record<string, string> = {},
    signal?: AbortSignal,
  ): Promise<Response> =>
    fetch(url, {
      method: 'POST',
      headers: {
        accept: ACCEPT,
        'content-type': 'application/json',
        'mcp-session-id': session,
        'mcp-protocol-version': '2025-11-25',
        ...extra,
      },
      body: JSON.stringify(message),
      ...(signal ? { signal } : {}),
    });

  beforeEach(() => {
    received = [];
  });
  afterEach(async () => {
    await transport.close();
    server.closeAllConnections();
    server.close();
  });

  it("opens a call's event stream before its answer exists, then writes the answer on it", async () => {
    const session = await start();
    const asked = nextRequest();
    // the headers come while the server has not answered yet: a client sees the stream open
    const response = await within(
      5_000,
      post(session, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'slow' } }),
    );
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    expect(response.headers.get('mcp-session-id')).toBe('session-1');
    const request = await asked;
    await transport.send(
      {
        jsonrpc: '2.0',
        id: request.id,
        method: 'notifications/progress',
        params: { progressToken: 1, progress: 1 },
      } as never,
      { relatedRequestId: request.id },
    );
    await transport.send({ jsonrpc: '2.0', id: request.id, result: { content: [{ type: 'text', text: 'done' }] } });
    const text = await response.text();
    expect(text).toContain('notifications/progress');
    expect(text).toContain('"text":"done"');
  });

  it('sends the event ids a client resumes with when there is an event store', async () => {
    const session = await start({ eventStore: true });
    const asked = nextRequest();
    const pending = post(session, { jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'x' } });
    const request = await asked;
    await transport.send({ jsonrpc: '2.0', id: request.id, result: { content: [] } });
    const text = await (await pending).text();
    // the priming event and the answer each carry an id
    expect(text.match(/^id: /gm)?.length).toBe(2);
  });

  it('writes an answer larger than the socket takes at once whole, waiting for the socket to drain', async () => {
    const session = await start();
    const asked = nextRequest();
    const pending = post(session, { jsonrpc: '2.0', id: 13, method: 'resources/read', params: { uri: 'big' } });
    const request = await asked;
    const text = 'x'.repeat(8 * 1024 * 1024);
    await transport.send({ jsonrpc: '2.0', id: request.id, result: { contents: [{ uri: 'big', text }] } });
    const body = await (await pending).text();
    const answer = JSON.parse(body.slice(body.indexOf('data: ') + 6).trim()) as {
      result: { contents: { text: string }[] };
    };
    expect(answer.result.contents[0]!.text).toHaveLength(text.length);
  });

  it('forgets the stream of a client that went away, so the session can open it again', async () => {
    const session = await start();
    const headers = { accept: 'text/event-stream', 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' };
    const first = new AbortController();
    const listening = await within(5_000, fetch(url, { headers, signal: first.signal }));
    expect(listening.status).toBe(200);
    first.abort();
    await listening.body?.cancel().catch(() => undefined);
    const again = await getStreamOnceFree(headers);
    expect(again.status).toBe(200);
    await again.body?.cancel();
  });

  it('frees the stream of a client that left before its answer was written', async () => {
    const session = await start();
    const headers = { accept: 'text/event-stream', 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' };
    // the first GET is answered only once its connection has gone
    route = (req, res) => {
      route = undefined;
      res.once('close', () => void transport.handleRequest(req, res));
      req.socket.destroy();
    };
    await fetch(url, { headers }).catch(() => undefined);
    const again = await getStreamOnceFree(headers);
    expect(again.status).toBe(200);
    await again.body?.cancel();
  });

  it('checks Origin and the session with the SDK, reading node:http headers', async () => {
    const session = await start();
    const foreign = await post(session, { jsonrpc: '2.0', id: 9, method: 'ping' }, { origin: 'http://evil.example' });
    expect(foreign.status).toBe(403);
    expect(await foreign.text()).toContain('Invalid Origin header');
    const unknown = await post('another-session', { jsonrpc: '2.0', id: 10, method: 'ping' });
    expect(unknown.status).toBe(404);
    const notification = await post(session, { jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(notification.status).toBe(202);
    expect(received).toHaveLength(0);
  });

  it('reads the body itself when the caller has not, and answers DELETE by closing the session', async () => {
    const session = await start();
    route = (req, res) => void transport.handleRequest(req, res);
    const asked = nextRequest();
    const pending = post(session, { jsonrpc: '2.0', id: 11, method: 'tools/list' });
    const request = await asked;
    expect(request.method).toBe('tools/list');
    await transport.send({ jsonrpc: '2.0', id: request.id, result: { tools: [] } });
    expect(await (await pending).text()).toContain('"tools":[]');
    const closed = await fetch(url, {
      method: 'DELETE',
      headers: { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' },
    });
    expect(closed.status).toBe(200);
    const after = await post(session, { jsonrpc: '2.0', id: 12, method: 'ping' });
    expect(after.status).toBe(404);
  });

  describe('answering quick requests directly', () => {
    const call = (id: number, name: string, meta?: Record<string, unknown>): JSONRPCRequest => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name, ...(meta ? { _meta: meta } : {}) },
    });
    const log = (text: string): JSONRPCMessage => ({
      jsonrpc: '2.0',
      method: 'notifications/message',
      params: { level: 'info', data: text },
    });
    /** Reads an event stream until `until` shows in it. */
    async function readUntil(reader: ReadableStreamDefaultReader<Uint8Array>, until: string): Promise<string> {
      let seen = '';
      while (!seen.includes(until)) {
        const chunk = await within(5_000, reader.read());
        if (chunk.done) throw new Error(`the stream ended before ${until}: ${seen}`);
        seen += new TextDecoder().decode(chunk.value);
      }
      return seen;
    }

    it('answers a call whose answer comes at once with one JSON body, session id and all', async () => {
      const session = await start({ eventStore: true, directWithinMs: 5_000 });
      const asked = nextRequest();
      const pending = post(session, call(21, 'quick'));
      const request = await asked;
      await transport.send({
        jsonrpc: '2.0',
        id: request.id,
        result: { content: [{ type: 'text', text: 'line one\nline "two"' }] },
      });
      const response = await pending;
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(response.headers.get('mcp-session-id')).toBe('session-1');
      expect(await response.json()).toEqual({
        jsonrpc: '2.0',
        id: 21,
        result: { content: [{ type: 'text', text: 'line one\nline "two"' }] },
      });
    });

    it('writes a large answer as JSON whole', async () => {
      const session = await start({ eventStore: true, directWithinMs: 5_000 });
      const asked = nextRequest();
      const pending = post(session, { jsonrpc: '2.0', id: 24, method: 'resources/read', params: { uri: 'big' } });
      const request = await asked;
      const text = 'x'.repeat(8 * 1024 * 1024);
      await transport.send({ jsonrpc: '2.0', id: request.id, result: { contents: [{ uri: 'big', text }] } });
      const response = await pending;
      expect(response.headers.get('content-type')).toBe('application/json');
      const answer = (await response.json()) as { result: { contents: { text: string }[] } };
      expect(answer.result.contents[0]!.text).toHaveLength(text.length);
    });

    it('streams a call that says something before its answer, in the order said, and hands the request over once', async () => {
      const session = await start({ eventStore: true, directWithinMs: 5_000 });
      const asked = nextRequest();
      const pending = post(session, call(22, 'chatty'));
      const request = await asked;
      // said together, before the SDK has the stream: both wait for it and keep their order
      const said = Promise.all([
        transport.send(log('first'), { relatedRequestId: request.id }),
        transport.send(log('second'), { relatedRequestId: request.id }),
      ]);
      const response = await within(5_000, pending);
      expect(response.headers.get('content-type')).toBe('text/event-stream');
      const reader = response.body!.getReader();
      let seen = await readUntil(reader, '"second"');
      await said;
      await transport.send({ jsonrpc: '2.0', id: request.id, result: { content: [] } });
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
        seen += new TextDecoder().decode(chunk.value);
      // the priming event, both log lines and the answer, each with the id a client resumes from
      expect(seen.match(/^id: /gm)?.length).toBe(4);
      expect(seen.indexOf('"first"')).toBeLessThan(seen.indexOf('"second"'));
      expect(seen.indexOf('"second"')).toBeLessThan(seen.indexOf('"id":22'));
      expect(received).toHaveLength(1);
    });

    it('keeps an answer sent while the request is being handed over behind what was said before it', async () => {
      const session = await start({ eventStore: true, directWithinMs: 5_000 });
      const asked = nextRequest();
      const pending = post(session, call(26, 'brief'));
      const request = await asked;
      void transport.send(log('before the answer'), { relatedRequestId: request.id });
      void transport.send({ jsonrpc: '2.0', id: request.id, result: { content: [] } });
      const text = await within(5_000, (await within(5_000, pending)).text());
      expect(text.indexOf('before the answer')).toBeGreaterThan(0);
      expect(text.indexOf('before the answer')).toBeLessThan(text.indexOf('"id":26'));
    });

    it('streams a call that takes longer than the window, and a client that lost it resumes from its last event', async () => {
      const session = await start({ eventStore: true, directWithinMs: 50 });
      const askedSlow = nextRequest();
      const pending = post(session, call(23, 'slow'));
      const slow = await askedSlow;
      const response = await within(5_000, pending);
      expect(response.headers.get('content-type')).toBe('text/event-stream');
      const reader = response.body!.getReader();
      const priming = new TextDecoder().decode((await within(5_000, reader.read())).value);
      expect(priming).toMatch(/^id: \S+\ndata: \n\n$/);
      const lastEventId = /^id: (\S+)/.exec(priming)![1]!;
      // the connection breaks; the answer comes meanwhile and is kept for the client's return
      await reader.cancel();
      await transport.send({ jsonrpc: '2.0', id: slow.id, result: { content: [{ type: 'text', text: 'kept' }] } });
      const resumed = await getStreamOnceFree({
        accept: 'text/event-stream',
        'mcp-session-id': session,
        'mcp-protocol-version': '2025-11-25',
        'last-event-id': lastEventId,
      });
      expect(resumed.status).toBe(200);
      const again = await readUntil(resumed.body!.getReader(), '"id":23');
      expect(again).toContain('"text":"kept"');
      expect(received).toHaveLength(1);
    });

    it('streams a call that asks for progress from the start: the client sees the stream open before any answer', async () => {
      const session = await start({ eventStore: true, directWithinMs: 5_000 });
      const asked = nextRequest();
      const response = await within(5_000, post(session, call(27, 'long', { progressToken: 'p' })));
      expect(response.headers.get('content-type')).toBe('text/event-stream');
      const request = await asked;
      await transport.send({ jsonrpc: '2.0', id: request.id, result: { content: [] } });
      expect(await response.text()).toContain('"id":27');
    });

    it('leaves what it does not vouch for to the SDK, refusals and all', async () => {
      const session = await start({ eventStore: true, directWithinMs: 5_000 });
      const unsupported = await post(session, call(28, 'x'), { 'mcp-protocol-version': '1999-01-01' });
      expect(unsupported.status).toBe(400);
      expect(await unsupported.text()).toContain('Unsupported protocol version');
      const jsonOnly = await post(session, call(29, 'x'), { accept: 'application/json' });
      expect(jsonOnly.status).toBe(406);
      const foreign = await post(session, call(30, 'x'), { origin: 'http://evil.example' });
      expect(foreign.status).toBe(403);
      const elsewhere = await post('another-session', call(31, 'x'));
      expect(elsewhere.status).toBe(404);
      const malformed = await post(session, { jsonrpc: '2.0', id: 32, method: 'tools/call', extra: true });
      expect(malformed.status).toBe(400);
      expect(received).toHaveLength(0);
      // a batch is the SDK's too: one stream for both answers
      const asked = [nextRequest(), nextRequest()];
      const batch = post(session, [call(33, 'a'), call(34, 'b')]);
      for (const request of await Promise.all(asked))
        await transport.send({ jsonrpc: '2.0', id: request.id, result: { content: [] } });
      const both = await (await batch).text();
      expect(both).toContain('"id":33');
      expect(both).toContain('"id":34');
    });

    it('hands a call over when its handler closes the stream for polling, and the client resumes', async () => {
      const session = await start({ eventStore: true, directWithinMs: 5_000 });
      let close: (() => void) | undefined;
      let info: MessageExtraInfo['requestInfo'];
      const handler = transport.onmessage!;
      transport.onmessage = (message, extra) => {
        close = extra?.closeSSEStream;
        info = extra?.requestInfo;
        handler(message, extra);
      };
      const asked = nextRequest();
      const pending = post(session, call(35, 'polled'));
      const request = await asked;
      // what the SDK tells a handler of the exchange, as it would
      expect(info?.headers['mcp-session-id']).toBe(session);
      expect(info?.url?.pathname).toBe('/mcp');
      expect(close).toBeTypeOf('function');
      close!();
      const text = await within(5_000, (await within(5_000, pending)).text());
      const lastEventId = /^id: (\S+)/m.exec(text)![1]!;
      await transport.send({ jsonrpc: '2.0', id: request.id, result: { content: [] } });
      const resumed = await getStreamOnceFree({
        accept: 'text/event-stream',
        'mcp-session-id': session,
        'mcp-protocol-version': '2025-11-25',
        'last-event-id': lastEventId,
      });
      expect(await readUntil(resumed.body!.getReader(), '"id":35')).toContain('"result"');
    });

    it('tells a client whose call was being answered directly that the session closed', async () => {
      const session = await start({ eventStore: true, directWithinMs: 5_000 });
      const asked = nextRequest();
      const pending = post(session, call(25, 'never'));
      await asked;
      await transport.close();
      const response = await within(5_000, pending);
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ error: { code: -32001, message: 'Session not found' } });
    });

    it('answers the next call after a client left before its answer', async () => {
      const session = await start({ eventStore: true, directWithinMs: 5_000 });
      const asked = nextRequest();
      const gone = new AbortController();
      const abandoned = post(session, call(36, 'abandoned'), {}, gone.signal).catch(() => undefined);
      const left = await asked;
      gone.abort();
      await abandoned;
      // the answer has nowhere to go (sending it may fail, as with the SDK's own transport); the session carries on
      await transport.send({ jsonrpc: '2.0', id: left.id, result: { content: [] } }).catch(() => undefined);
      const next = nextRequest();
      const pending = post(session, call(37, 'next'));
      await transport.send({ jsonrpc: '2.0', id: (await next).id, result: { content: [] } });
      expect(await (await pending).json()).toMatchObject({ id: 37 });
    });
  });
});
