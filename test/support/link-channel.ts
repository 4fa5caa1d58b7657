import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect, vi } from 'vitest';
import type { TestControlPlane } from './control-plane';

/** One `approval.link` notification as a chat-ops bot receives it. */
export interface SentLink {
  approvalId: string;
  user: { id: string; email: string | null; name: string | null };
  url: string;
}

export interface LinkChannel {
  received: SentLink[];
  /** the link sent to `userId` for `approvalId`, once it has arrived */
  linkFor(approvalId: string, userId: string): Promise<string>;
  close(): Promise<void>;
}

/**
 * Where one-time review links go: a webhook endpoint subscribed to
 * `approval.link`, as a chat-ops bot that writes to each person would be.
 * Listens on 127.0.0.1, which the embedded mode lets webhooks reach.
 */
export async function aLinkChannel(cp: TestControlPlane, token = cp.ownerToken): Promise<LinkChannel> {
  const received: SentLink[] = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString('utf8')));
    req.on('end', () => {
      const event = JSON.parse(raw) as {
        type: string;
        data: { approval_id: string; user: SentLink['user']; url: string };
      };
      if (event.type === 'approval.link')
        received.push({ approvalId: event.data.approval_id, user: event.data.user, url: event.data.url });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/links`;
  const created = await cp.request('POST', '/v1/webhooks', {
    token,
    body: { name: `links-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`, url, events: ['approval.link'] },
  });
  expect(created.status, created.text).toBe(201);
  return {
    received,
    linkFor: (approvalId, userId) =>
      vi.waitFor(
        () => {
          const found = received.find((sent) => sent.approvalId === approvalId && sent.user.id === userId);
          if (!found) throw new Error(`no link for ${userId} on ${approvalId} yet`);
          return found.url;
        },
        { timeout: 30_000, interval: 50 },
      ),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
