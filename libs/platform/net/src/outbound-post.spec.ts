import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postSigned } from './outbound-post';
import { guardedLookup } from './ssrf-guard';

const loopbackAllowed = { allowCidrs: [], allowLoopback: true };

describe('posting a delivery', () => {
  let server: Server;
  let base: string;
  const seen: { method?: string; headers: Record<string, unknown>; body: string }[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen.push({ method: req.method, headers: req.headers, body });
        if (req.url?.startsWith('/redirect')) res.writeHead(302, { location: '/elsewhere' }).end();
        else if (req.url?.startsWith('/hang'))
          return; // never answers
        else if (req.url?.startsWith('/fail')) res.writeHead(503).end('busy');
        else if (req.url?.startsWith('/slow')) setTimeout(() => res.writeHead(204).end(), 150);
        else res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('sends the body and headers once and reports a 2xx as success', async () => {
    const outcome = await postSigned(
      `${base}/ok?token=abc`,
      { 'content-type': 'application/json', 'x-aileron-event': 'policy.updated' },
      '{"a":1}',
      { policy: loopbackAllowed, timeoutMs: 5000 },
    );
    expect(outcome).toMatchObject({ status: 204, error: null });
    expect(seen.at(-1)).toMatchObject({
      method: 'POST',
      body: '{"a":1}',
      headers: { 'x-aileron-event': 'policy.updated', 'content-length': '7' },
    });
  });

  it('reports how long the receiver took to answer (the delivery log shows it)', async () => {
    const outcome = await postSigned(`${base}/slow`, {}, '{}', { policy: loopbackAllowed, timeoutMs: 5000 });
    expect(outcome).toMatchObject({ status: 204, error: null });
    // the receiver waits 150 ms before it answers
    expect(outcome.durationMs).toBeGreaterThanOrEqual(100);
  });

  it('does not follow redirects, and names failures without the path or query', async () => {
    const before = seen.length;
    const redirected = await postSigned(`${base}/redirect/secret-path?token=abc`, {}, '{}', {
      policy: loopbackAllowed,
      timeoutMs: 5000,
    });
    expect(redirected).toMatchObject({ status: 302, error: 'HTTP 302: redirects are not followed' });
    expect(seen.length).toBe(before + 1);
    expect(await postSigned(`${base}/fail`, {}, '{}', { policy: loopbackAllowed, timeoutMs: 5000 })).toMatchObject({
      status: 503,
      error: 'HTTP 503',
    });
  });

  it('gives up on a receiver that does not answer in time', async () => {
    expect(await postSigned(`${base}/hang`, {}, '{}', { policy: loopbackAllowed, timeoutMs: 300 })).toMatchObject({
      status: null,
      error: 'timed out after 0.3 s',
    });
  });

  it('summarises a refused connection, and refuses a target the SSRF rules forbid without connecting', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    expect(
      await postSigned(`http://127.0.0.1:${port}/secret-path`, {}, '{}', { policy: loopbackAllowed, timeoutMs: 5000 }),
    ).toMatchObject({ status: null, error: 'connection refused' });

    const before = seen.length;
    const refused = await postSigned(`${base}/ok`, {}, '{}', {
      policy: { allowCidrs: [], allowLoopback: false },
      timeoutMs: 5000,
    });
    expect(refused.status).toBeNull();
    expect(refused.error).toMatch(/^Outbound URL to 127\.0\.0\.1 refused: is a loopback address$/);
    expect(seen.length).toBe(before);
  });
});

describe('the socket-level resolver', () => {
  function resolve(
    host: string,
    policy: { allowCidrs: string[]; allowLoopback: boolean },
    all: boolean,
  ): Promise<{ error: Error | null; result: unknown }> {
    return new Promise((done) => {
      const lookup = guardedLookup(host, policy) as unknown as (
        h: string,
        o: object,
        cb: (error: Error | null, result?: unknown) => void,
      ) => void;
      lookup(host, { all }, (error, result) => done({ error, result }));
    });
  }

  it('refuses a name that resolves to an address the rules forbid (DNS rebinding after the URL check)', async () => {
    const { error } = await resolve('localhost', { allowCidrs: [], allowLoopback: false }, true);
    expect(error?.message).toMatch(
      /^Outbound URL to localhost refused: resolves to (127\.0\.0\.1|::1), a loopback address$/,
    );
  });

  it('hands allowed addresses to the socket in the shape it asked for', async () => {
    const all = await resolve('localhost', loopbackAllowed, true);
    expect(all.error).toBeNull();
    expect(all.result).toEqual(
      expect.arrayContaining([expect.objectContaining({ address: expect.any(String), family: expect.any(Number) })]),
    );
    const one = await resolve('localhost', loopbackAllowed, false);
    expect(one.error).toBeNull();
    expect(typeof one.result).toBe('string');
  });
});
