import { Controller, Query, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AccessService, AuthenticatedRequest, slug, StreamAccess, TenantScope, WorkspaceScope } from '@aileron/auth';
import { Route } from '@aileron/http';
import type { PublicEvent } from '@aileron/outbox';
import { EventsService, matches } from './events.service';

const HEARTBEAT_MS = 15_000;
const EVENTS_PERMISSION = 'workspace.read';
const eventsQuery = z.object({
  types: z
    .string()
    .max(1000)
    .optional()
    .transform((v) =>
      v
        ? v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : [],
    )
    .describe('comma-separated types or `domain.*` prefixes; default all'),
});

@Controller()
export class EventsController {
  constructor(
    private readonly events: EventsService,
    private readonly access: AccessService,
    private readonly streams: StreamAccess,
  ) {}

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/events',
    summary: "The workspace's events as a server-sent-events stream",
    description:
      'Each event is `id: evt_<n>`, `event: <type>`, `data: <JSON>` (the shape webhooks receive). Reconnect with `Last-Event-ID` to get what was missed (up to 1,000 events). A comment line every 15 s keeps proxies from closing the stream.',
    tag: 'events',
    permission: EVENTS_PERMISSION,
    tenancy: 'workspace',
    params: z.object({ ws: slug }),
    query: eventsQuery,
    produces: 'text/event-stream',
  })
  async stream(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: z.infer<typeof eventsQuery>,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const filters = query.types;
    let last = 0n;
    const pending: PublicEvent[] = [];
    let live = false;
    const raw = reply.raw;
    const send = (event: PublicEvent): void => {
      const n = BigInt(event.id.slice(4));
      if (n <= last || !matches(filters, event.type)) return;
      last = n;
      raw.write(`id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
    };
    // until the stream is open, an ending is kept and said right after
    let early: [string, string] | undefined;
    let end = (reason: string, detail: string): void => void (early ??= [reason, detail]);
    // subscribe before replaying, so nothing committed in between is missed; ids drop repeats
    const unsubscribe = this.events.subscribe(
      scope,
      (event) => (live ? send(event) : pending.push(event)),
      () =>
        end('live events interrupted', 'Redis cannot be reached; reconnect with Last-Event-ID to get what was missed'),
    );
    const lastEventId = request.headers['last-event-id'];
    const replay = typeof lastEventId === 'string' ? await this.events.replay(scope, lastEventId) : [];
    reply.hijack();
    raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      'x-request-id': String(request.id),
    });
    raw.write(': connected\n\n');
    if (typeof lastEventId === 'string') {
      const match = /^evt_(\d+)$/.exec(lastEventId);
      if (match) last = BigInt(match[1]!);
    }
    for (const event of replay) send(event);
    live = true;
    for (const event of pending.sort((a, b) => (BigInt(a.id.slice(4)) < BigInt(b.id.slice(4)) ? -1 : 1))) send(event);
    end = (reason, detail) => {
      if (raw.writableEnded || raw.destroyed) return;
      raw.write(`event: stream.ended\ndata: ${JSON.stringify({ reason, detail })}\n\n`);
      raw.end();
    };
    if (early) end(...early);
    const heartbeat = setInterval(() => raw.write(': keep-alive\n\n'), HEARTBEAT_MS);
    heartbeat.unref();
    // a revoked token or a removed membership ends the stream, not just the next request
    const release = this.streams.hold(
      (request as AuthenticatedRequest).credential ?? '',
      (principal) => this.access.workspace(principal, scope.workspaceSlug, EVENTS_PERMISSION),
      (reason, cause) => end(cause === 'shutdown' ? 'shutting down' : 'access withdrawn', reason),
    );
    raw.on('close', () => {
      clearInterval(heartbeat);
      unsubscribe();
      release();
    });
  }
}
