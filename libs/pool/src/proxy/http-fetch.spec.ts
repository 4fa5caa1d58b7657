import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { httpExchange, httpFetch } from './http-fetch';

describe('httpFetch (the proxy’s fetch towards instances)', () => {
  let server: Server;
  let base: string;
  const received: { method: string; headers: Record<string, unknown>; body: string }[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        received.push({ method: req.method!, headers: req.headers, body });
        if (req.url === '/stream') {
          res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 's-1' });
          res.write('data: one\n\n');
          setTimeout(() => res.end('data: two\n\n'), 20);
        } else if (req.url === '/broken') {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write('data: half\n\n');
          setTimeout(() => res.socket!.destroy(), 20);
        } else if (req.url === '/accepted') {
          res.writeHead(202).end();
        } else if (req.url === '/empty') {
          res.writeHead(204).end();
        } else if (req.url === '/hang') {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(': open\n\n');
        } else {
          res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"nope"}');
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  it('sends method, headers and body, and answers a standard Response whose end is told after the reader took everything', async () => {
    const events: string[] = [];
    const response = await httpFetch(
      `${base}/stream`,
      {
        method: 'POST',
        headers: new Headers({ 'content-type': 'application/json', authorization: 'Bearer t' }),
        body: '{"jsonrpc":"2.0"}',
      },
      { end: () => events.push('end'), broke: () => events.push('broke') },
    );
    expect(response.status).toBe(200);
    expect(response.headers.get('mcp-session-id')).toBe('s-1');
    expect(await response.text()).toBe('data: one\n\ndata: two\n\n');
    expect(events).toEqual(['end']);
    expect(received.at(-1)).toMatchObject({
      method: 'POST',
      body: '{"jsonrpc":"2.0"}',
      headers: { authorization: 'Bearer t', 'content-type': 'application/json' },
    });
  });

  it('tells a body cut off mid-stream as broken, and the reader gets an error', async () => {
    const events: string[] = [];
    const response = await httpFetch(
      `${base}/broken`,
      { method: 'POST', body: '{}' },
      { end: () => events.push('end'), broke: () => events.push('broke') },
    );
    await expect(response.text()).rejects.toThrow();
    expect(events).toEqual(['broke']);
  });

  it('bodies as fetch has them (none for 204, empty for 202), and error statuses come through as they are', async () => {
    const empty = await httpFetch(`${base}/empty`, { method: 'DELETE' });
    expect(empty.status).toBe(204);
    expect(empty.body).toBeNull();
    const accepted = await httpFetch(`${base}/accepted`, { method: 'POST', body: '{}' });
    expect(accepted.status).toBe(202);
    expect(await accepted.text()).toBe('');
    const missing = await httpFetch(`${base}/nothing`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: 'nope' });
  });

  it('an aborted signal ends an open stream, and one aborted before the request refuses at once', async () => {
    const controller = new AbortController();
    const response = await httpFetch(`${base}/hang`, { signal: controller.signal });
    const reading = response.text();
    controller.abort(new Error('closing the session'));
    await expect(reading).rejects.toThrow();
    await expect(httpFetch(`${base}/stream`, { signal: AbortSignal.abort(new Error('already gone')) })).rejects.toThrow(
      'already gone',
    );
  });

  it('a server that is not there rejects, as fetch does', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    await expect(httpFetch(`http://127.0.0.1:${port}/mcp`, { method: 'POST', body: '{}' })).rejects.toThrow(
      /ECONNREFUSED/,
    );
  });
});

describe('connections to servers elsewhere pass the SSRF rules on every socket', () => {
  it('a name resolving to a refused address is not connected to, though nothing checked it before; our own instances are not held to it', async () => {
    const server = createServer((_req, res) => res.writeHead(200).end('reached'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      // localhost resolves to loopback, which this policy refuses (server mode without an allow-list)
      await expect(
        httpExchange(`http://localhost:${port}/`, { method: 'GET' }, { allowCidrs: [], allowLoopback: false }),
      ).rejects.toThrow(/refused: resolves to .*loopback/);
      const allowed = await httpExchange(
        `http://localhost:${port}/`,
        { method: 'GET' },
        { allowCidrs: ['127.0.0.0/8', '::1/128'], allowLoopback: false },
      );
      allowed.response.resume();
      expect(allowed.response.statusCode).toBe(200);
      const own = await httpExchange(`http://localhost:${port}/`, { method: 'GET' });
      own.response.resume();
      expect(own.response.statusCode).toBe(200);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
