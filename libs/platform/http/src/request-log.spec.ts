import { createServer, IncomingMessage, request as httpRequest, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pinoHttp } from 'pino-http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PinoLogger, requestLoggerOptions } from '@aileron/logging';
import { HttpMetrics } from './http-metrics';
import { RequestLog } from './request-log';

/** A server whose every request RequestLog follows, answered as `answer` says. */
async function serve(
  log: RequestLog,
  answer: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    log.follow(req, res, '/things/:id', 'req-1');
    answer(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

describe('RequestLog: one line and one count per request, whoever answered it', () => {
  const lines: Record<string, unknown>[] = [];
  let metrics: HttpMetrics;
  let log: RequestLog;
  const previous = PinoLogger.root;

  beforeAll(() => {
    // the request logger exactly as the app configures it, writing here
    const sink = new Writable({
      write: (chunk: Buffer, _encoding, done) => (lines.push(JSON.parse(chunk.toString())), done()),
    });
    (PinoLogger as { root: unknown }).root = pinoHttp(requestLoggerOptions('debug'), sink).logger;
    metrics = new HttpMetrics();
    log = new RequestLog(metrics);
  });
  afterAll(() => void ((PinoLogger as { root: unknown }).root = previous));

  const until = async (count: number): Promise<void> => {
    for (let i = 0; i < 100 && lines.length < count; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  };

  it('logs the request id, the path without its query and the status, and counts it under the route template', async () => {
    const { server, url } = await serve(log, (_req, res) => void res.writeHead(404).end());
    try {
      lines.length = 0;
      const answer = await fetch(`${url}/things/42?signature=secret`);
      expect(answer.headers.get('x-request-id')).toBe('req-1');
      await until(1);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        level: 'info',
        reqId: 'req-1',
        req: { id: 'req-1', method: 'GET', path: '/things/42' },
        res: { status: 404 },
        msg: 'request completed',
      });
      expect(JSON.stringify(lines[0])).not.toContain('secret');
      expect(await metrics.registry.getSingleMetricAsString('aileron_http_requests_total')).toContain(
        'aileron_http_requests_total{method="GET",route="/things/:id",status="404"} 1',
      );
    } finally {
      server.close();
    }
  });

  it('says when the client left before the answer, and does not count what was never answered', async () => {
    const { server, url } = await serve(log, () => undefined);
    try {
      lines.length = 0;
      await new Promise<void>((resolve) => {
        const sent = httpRequest(`${url}/things/7`, () => undefined);
        sent.on('error', () => resolve());
        sent.end();
        setTimeout(() => sent.destroy(), 100);
      });
      await until(1);
      expect(lines[0]).toMatchObject({ level: 'debug', req: { path: '/things/7' }, msg: 'request aborted' });
      expect(await metrics.registry.getSingleMetricAsString('aileron_http_requests_total')).not.toContain(
        'route="/things/:id",status="200"',
      );
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('counts and logs an answer a fast path gave at once from memory', async () => {
    lines.length = 0;
    const answered = log.atOnce('GET', '/polls', 304);
    answered({ method: 'GET', url: '/polls' } as IncomingMessage, 'req-2');
    answered({ method: 'GET', url: '/polls' } as IncomingMessage, 'req-3');
    expect(lines.map((line) => [line.reqId, line.msg, (line.res as { status: number }).status])).toEqual([
      ['req-2', 'request completed', 304],
      ['req-3', 'request completed', 304],
    ]);
    expect(await metrics.registry.getSingleMetricAsString('aileron_http_requests_total')).toContain(
      'aileron_http_requests_total{method="GET",route="/polls",status="304"} 2',
    );
  });
});
