import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idpFetch, IdpFetchError, openIdClientFetch, scrubRemoteText } from './idp-http';

const LOOPBACK_ALLOWED = { allowCidrs: [], allowLoopback: true };
const LOOPBACK_REFUSED = { allowCidrs: [], allowLoopback: false };
const LIMITS = { timeoutMs: 400, maxBytes: 1024 };

describe('idpFetch', () => {
  let server: Server;
  let base = '';
  const handlers = new Map<string, (req: IncomingMessage, res: ServerResponse) => void>();
  let requests = 0;

  beforeAll(async () => {
    server = createServer((req, res) => {
      requests++;
      const handler = handlers.get(req.url ?? '');
      if (handler) handler(req, res);
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    handlers.set('/small', (_req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"keys":[]}'),
    );
    handlers.set('/declared-large', (_req, res) =>
      res.writeHead(200, { 'content-length': '5000' }).end('x'.repeat(5000)),
    );
    handlers.set('/streamed-large', (_req, res) => {
      res.writeHead(200);
      for (let i = 0; i < 10; i++) res.write('x'.repeat(200));
      res.end();
    });
    handlers.set('/drip', (_req, res) => {
      res.writeHead(200);
      const drip = setInterval(() => (res.destroyed ? clearInterval(drip) : res.write(' ')), 50);
    });
    handlers.set('/redirect', (_req, res) => res.writeHead(302, { location: `${base}/small` }).end());
    handlers.set('/echo', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () =>
        res
          .writeHead(400, { 'content-type': 'application/json' })
          .end(JSON.stringify({ method: req.method, body: Buffer.concat(chunks).toString() })),
      );
    });
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('answers with status, headers and body', async () => {
    const answer = await idpFetch(`${base}/small`, {}, LOOPBACK_ALLOWED, LIMITS);
    expect(answer.status).toBe(200);
    expect(answer.headers['content-type']).toBe('application/json');
    expect(answer.body.toString()).toBe('{"keys":[]}');
  });

  it('refuses an answer larger than the bound, whether it says so up front or not', async () => {
    await expect(idpFetch(`${base}/declared-large`, {}, LOOPBACK_ALLOWED, LIMITS)).rejects.toThrow(/more than 1 KiB/);
    await expect(idpFetch(`${base}/streamed-large`, {}, LOOPBACK_ALLOWED, LIMITS)).rejects.toThrow(/more than 1 KiB/);
  });

  it('gives up when the whole answer takes longer than the bound, however steadily it trickles', async () => {
    await expect(idpFetch(`${base}/drip`, {}, LOOPBACK_ALLOWED, LIMITS)).rejects.toThrow(/did not answer within 0.4 s/);
  });

  it('does not follow redirects', async () => {
    const answer = await idpFetch(`${base}/redirect`, {}, LOOPBACK_ALLOWED, LIMITS);
    expect(answer.status).toBe(302);
  });

  it('refuses plain http off this machine and addresses the outbound policy refuses, before connecting', async () => {
    const before = requests;
    await expect(idpFetch('http://idp.example.com/jwks', {}, LOOPBACK_ALLOWED, LIMITS)).rejects.toThrow(/https/);
    await expect(idpFetch('https://169.254.169.254/jwks', {}, LOOPBACK_ALLOWED, LIMITS)).rejects.toThrow(
      /cloud metadata/,
    );
    await expect(idpFetch(`${base}/small`, {}, LOOPBACK_REFUSED, LIMITS)).rejects.toThrow(/loopback/);
    await expect(
      idpFetch(`${base.replace('127.0.0.1', 'localhost')}/small`, {}, LOOPBACK_REFUSED, LIMITS),
    ).rejects.toBeInstanceOf(IdpFetchError);
    await expect(
      idpFetch(`${base}/small`, {}, { allowCidrs: ['127.0.0.1/32'], allowLoopback: false }, LIMITS),
    ).resolves.toMatchObject({ status: 200 });
    expect(requests - before).toBe(1);
  });

  it("serves openid-client: a Response of the answer, the request's method and body sent, an error answer handed to the log hook", async () => {
    const logged: number[] = [];
    const fetcher = openIdClientFetch(LOOPBACK_ALLOWED, (answer) => logged.push(answer.status));
    const response = await fetcher(`${base}/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ code: 'c' }),
      redirect: 'manual',
    });
    expect(response.status).toBe(400);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(await response.json()).toEqual({ method: 'POST', body: 'code=c' });
    expect(logged).toEqual([400]);
  });
});

describe('scrubRemoteText', () => {
  it('keeps a short printable excerpt with anything token-like cut out', () => {
    const scrubbed = scrubRemoteText(
      '{"error":"invalid_client","secret":"c2VjcmV0LXZhbHVlLXRoYXQtaXMtbG9uZw"}\n\u0000<b>bad</b>',
    );
    expect(scrubbed).toBe('{"error":"invalid_client","secret":"[redacted]"} <b>bad</b>');
    expect(scrubRemoteText('word '.repeat(200))).toHaveLength(301);
  });
});
