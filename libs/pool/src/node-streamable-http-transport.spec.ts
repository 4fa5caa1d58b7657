import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import type { JSONRPCMessage, JSONRPCRequest } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BoundedEventStore } from './proxy/bounded-event-store';
import { AnswerLoad, NodeStreamableHttpTransport } from './node-streamable-http-transport';

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

  async function start(
    options: { eventStore?: boolean; jsonWithinMs?: number; jsonWhenConcurrent?: number; load?: AnswerLoad } = {},
  ): Promise<string> {
    received = [];
    waiting = [];
    transport = new NodeStreamableHttpTransport({
      sessionIdGenerator: () => 'session-1',
      enableDnsRebindingProtection: true,
      allowedOrigins: ['http://console.example'],
      ...(options.eventStore ? { eventStore: new BoundedEventStore() } : {}),
      ...(options.jsonWithinMs !== undefined
        ? {
            answerAsJson: {
              withinMs: options.jsonWithinMs,
              whenConcurrent: options.jsonWhenConcurrent ?? 1,
              load: options.load ?? new AnswerLoad(),
            },
          }
        : {}),
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

  describe('with answers as JSON when they are ready soon', () => {
    it('answers a call whose answer comes at once with one JSON body, session id and all', async () => {
      const session = await start({ eventStore: true, jsonWithinMs: 5_000 });
      const asked = nextRequest();
      const pending = post(session, { jsonrpc: '2.0', id: 21, method: 'tools/call', params: { name: 'quick' } });
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

    it('streams a call that sends something of its own before its answer, from that message on', async () => {
      const session = await start({ eventStore: true, jsonWithinMs: 5_000 });
      const asked = nextRequest();
      const pending = post(session, {
        jsonrpc: '2.0',
        id: 22,
        method: 'tools/call',
        params: { name: 'chatty', _meta: { progressToken: 'p' } },
      });
      const request = await asked;
      await transport.send(
        { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p', progress: 1 } },
        { relatedRequestId: request.id },
      );
      // the progress reaches the client while the call still runs: the stream is open with the priming event and the progress
      const response = await within(5_000, pending);
      expect(response.headers.get('content-type')).toBe('text/event-stream');
      const reader = response.body!.getReader();
      let seen = '';
      while (!seen.includes('notifications/progress'))
        seen += new TextDecoder().decode((await within(5_000, reader.read())).value);
      await transport.send({ jsonrpc: '2.0', id: request.id, result: { content: [] } });
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read())
        seen += new TextDecoder().decode(chunk.value);
      expect(seen.match(/^id: /gm)?.length).toBe(3);
      expect(seen).toContain('"id":22');
    });

    it('streams a call that takes longer than the window, priming event first, so it can be resumed', async () => {
      const session = await start({ eventStore: true, jsonWithinMs: 50 });
      const asked = nextRequest();
      const pending = post(session, { jsonrpc: '2.0', id: 23, method: 'tools/call', params: { name: 'slow' } });
      const request = await asked;
      const response = await within(5_000, pending);
      expect(response.headers.get('content-type')).toBe('text/event-stream');
      const reader = response.body!.getReader();
      const priming = new TextDecoder().decode((await within(5_000, reader.read())).value);
      expect(priming).toMatch(/^id: \S+\ndata: \n\n$/);
      await transport.send({ jsonrpc: '2.0', id: request.id, result: { content: [] } });
      const answer = new TextDecoder().decode((await reader.read()).value);
      expect(answer).toContain('"id":23');
      await reader.cancel();
    });

    it('writes a large answer as JSON whole', async () => {
      const session = await start({ eventStore: true, jsonWithinMs: 5_000 });
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

    it('streams a lone request at once, and holds for JSON only while others are being answered too', async () => {
      const session = await start({ eventStore: true, jsonWithinMs: 5_000, jsonWhenConcurrent: 2 });
      const askedFirst = nextRequest();
      const first = post(session, { jsonrpc: '2.0', id: 31, method: 'tools/call', params: { name: 'alone' } });
      const lone = await askedFirst;
      // alone: the stream opens before the answer exists
      const firstResponse = await within(5_000, first);
      expect(firstResponse.headers.get('content-type')).toBe('text/event-stream');
      const askedSecond = nextRequest();
      const second = post(session, { jsonrpc: '2.0', id: 32, method: 'tools/call', params: { name: 'beside' } });
      const beside = await askedSecond;
      await transport.send({ jsonrpc: '2.0', id: beside.id, result: { content: [] } });
      const secondResponse = await second;
      expect(secondResponse.headers.get('content-type')).toBe('application/json');
      expect(await secondResponse.json()).toMatchObject({ id: 32 });
      await transport.send({ jsonrpc: '2.0', id: lone.id, result: { content: [] } });
      expect(await firstResponse.text()).toContain('"id":31');
    });

    it('counts what the other transports sharing its load are answering', async () => {
      const shared = new AnswerLoad();
      const session = await start({ eventStore: true, jsonWithinMs: 5_000, jsonWhenConcurrent: 2, load: shared });
      // another session of the same proxy is answering a request: this lone one is held for JSON
      shared.enter();
      const asked = nextRequest();
      const pending = post(session, {
        jsonrpc: '2.0',
        id: 41,
        method: 'tools/call',
        params: { name: 'beside-another' },
      });
      const request = await asked;
      expect(shared.current).toBe(2);
      await transport.send({ jsonrpc: '2.0', id: request.id, result: { content: [] } });
      const response = await pending;
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(await response.json()).toMatchObject({ id: 41 });
      shared.leave();
    });

    it('ends a held call as an empty stream when the session closes before its answer', async () => {
      const session = await start({ eventStore: true, jsonWithinMs: 5_000 });
      const asked = nextRequest();
      const pending = post(session, { jsonrpc: '2.0', id: 25, method: 'tools/call', params: { name: 'never' } });
      await asked;
      await transport.close();
      const response = await within(5_000, pending);
      expect(response.headers.get('content-type')).toBe('text/event-stream');
      expect(await within(5_000, response.text())).not.toContain('"id":25');
    });
  });
});
