import type { IncomingMessage, Server } from 'node:http';
import { connect, Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ApprovalsService } from '../../libs/approvals/src';
import { AgentSessionsService } from '../../libs/sessions/src';
import { aGateway, aWorkspace } from '../support/builders';
import { captureOutput } from '../support/captured-output';
import { startApiControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';

describe('a control plane that stops with requests under way', () => {
  it('answers its long-polls at once, closes a request that does not end within the grace, and says what it waited on', async () => {
    // the warning is a log line: caught from before the control plane's logger is made
    const output = captureOutput();
    try {
      const cp = await startApiControlPlane({ AILERON_SHUTDOWN_GRACE_SECONDS: '1' });
      const ws = await aWorkspace(cp, cp.ownerToken);
      const policy = await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
        body: { rules: [{ id: 'review-merges', effect: 'approval', tools: ['merge_*'] }] },
      });
      expect(policy.status, policy.text).toBe(200);
      const gateway = await aGateway(cp, cp.ownerToken, ws.slug);
      const asked = await cp.request('POST', '/v1/gateway/approvals', {
        token: gateway.token,
        body: { server: 'github', tool: 'merge_pr', arguments: { n: 7 }, session: 's-1', principal: 'dev@example.com' },
      });
      expect(asked.status, asked.text).toBe(201);
      const session = (await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug } })).body;

      // two long-polls that would each wait a minute for a decision or a message
      const decision = cp.request('GET', `/v1/approvals/${asked.body.id}?wait=60`, { token: gateway.token });
      const messages = cp.request('GET', `/v1/sessions/${session.id}/messages?wait=60`, {
        token: session.caveat_token,
      });
      await eventually(
        'both long-polls parked',
        () =>
          cp.cp.app.get(ApprovalsService).waiting.sleeping(asked.body.id) === 1 &&
          cp.cp.app.get(AgentSessionsService).waiting.sleeping(session.id) === 1,
      );
      // the server's side of the two raw clients below, awaited as events rather than counted: the test client's own
      // keep-alive connections would make up a count
      const server = cp.cp.app.getHttpServer() as Server;
      const accepted = new Set<number>();
      server.on('connection', (socket: Socket) => accepted.add(socket.remotePort ?? 0));
      let halfArrived = false;
      server.on('request', (req: IncomingMessage) => (halfArrived ||= req.url?.endsWith('/secrets/half') === true));
      // a client that connected and sent nothing (a load balancer's spare connection): Node's close waited for its
      // headers for a minute
      const unused = connect(Number(new URL(cp.url).port), '127.0.0.1');
      await new Promise<void>((resolve) => unused.once('connect', () => resolve()));
      await eventually('the server took the unused connection', () => accepted.has(unused.localPort ?? -1));
      const unusedClosed = new Promise<void>((resolve) => unused.on('close', () => resolve()));
      unused.on('error', () => undefined);
      // and a client that sent half a request and went quiet: nothing on the server ends that one
      const stalled = connect(Number(new URL(cp.url).port), '127.0.0.1');
      const stalledClosed = new Promise<void>((resolve) => stalled.on('close', () => resolve()));
      stalled.on('error', () => undefined);
      stalled.write(
        `POST /v1/workspaces/${ws.slug}/secrets/half HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
          `Authorization: Bearer ${cp.ownerToken}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"value":`,
      );
      await eventually('the half request reached the server', () => halfArrived);

      await cp.close();

      // the long-polls answered with what there was: still pending, no message yet
      const decided = await decision;
      expect(decided.status, decided.text).toBe(200);
      expect(decided.body.status).toBe('pending');
      const read = await messages;
      expect(read.status, read.text).toBe(200);
      expect(read.body.messages).toEqual([]);
      // the unused connection was let go at once; the stalled request's was closed once the grace was over, and the
      // log says which request it was (its path, which names a secret, left out)
      await unusedClosed;
      await stalledClosed;
      const warning = output
        .lines()
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { msg: string })
        .find((line) => line.msg.startsWith('shutdown: work still under way after 1 s'));
      expect(warning).toMatchObject({
        level: 'warn',
        hooks: [],
        connections: 1,
        requests: [`POST /v1/workspaces/${ws.slug}/secrets/[redacted]`],
      });
      expect(output.text()).not.toContain(cp.ownerToken);
    } finally {
      output.restore();
    }
  });
});
