import { z } from 'zod';
import { slug } from '@aileron/auth';
import { legacyPageView, pageQuery } from '@aileron/http';
import { CAVEAT_GLOB, CAVEAT_NAME, MAX_LIST, SANDBOX_CAVEAT_NAME, SESSION_CAPABILITIES } from './domain/caveat-token';
import type { MessageRecord, SessionRecord } from './agent-sessions.repository';
import { MAX_TTL_SECONDS } from './agent-sessions.service';

export const idParams = z.object({ id: z.uuid() });
export const wsParams = z.object({ ws: slug });
export const wsIdParams = z.object({ ws: slug, id: z.uuid() });
const name = z.string().regex(CAVEAT_NAME, 'must be a server name (letters, digits, ".", "_", "-")');
const sandboxName = z
  .string()
  .regex(
    SANDBOX_CAVEAT_NAME,
    'must be a sandbox\'s name as the API shows it: lower case letters, digits and "-", at most 63 (e.g. "fix-the-bug" for a sandbox made as "Fix the bug")',
  );
const capability = z.enum(SESSION_CAPABILITIES, { message: `must be one of ${SESSION_CAPABILITIES.join(', ')}` });

/** What a session is started with; the workspace is the path's (`/v1/workspaces/{ws}/sessions`). */
export const startInWorkspaceBody = z
  .object({
    name: z.string().trim().min(1).max(100).optional(),
    agent: z
      .string()
      .trim()
      .min(1)
      .max(64)
      .optional()
      .describe('which agent runs in it (claude, codex, opencode, goose, …), for people reading the list'),
    ttl_seconds: z.number().int().min(60).max(MAX_TTL_SECONDS).optional().describe('default 8 hours, at most 7 days'),
    caps: z
      .array(capability)
      .min(1)
      .max(SESSION_CAPABILITIES.length)
      .optional()
      .describe(`a subset of ${SESSION_CAPABILITIES.join(', ')} (the default: all but sandbox:use)`),
    caveats: z
      .object({
        servers: z.array(name).min(1).max(MAX_LIST).optional().describe('only these servers of the workspace'),
        tools: z
          .array(z.string().regex(CAVEAT_GLOB, 'must be a tool glob (letters, digits, "_", ".", "-", "*", "?")'))
          .min(1)
          .max(MAX_LIST)
          .optional()
          .describe('only tools (`server__tool`) matching one of these globs'),
        sandbox: sandboxName.optional().describe('only this sandbox (its name as the API shows it)'),
      })
      .strict()
      .optional(),
  })
  .strict();

/** The alias `POST /v1/sessions` names the workspace in the body. */
export const startSessionBody = startInWorkspaceBody
  .extend({ workspace: slug.describe('the workspace the session acts in') })
  .strict();

export const listQuery = pageQuery()
  .extend({
    live: z.enum(['true', 'false']).default('true').describe('only sessions that have neither ended nor expired'),
  })
  .strict();

/** The alias `GET /v1/sessions` names the workspace in the query. */
export const aliasListQuery = listQuery.extend({ workspace: slug }).strict();

export const sessionView = z.object({
  id: z.string(),
  workspace: z.string(),
  name: z.string().nullable(),
  agent: z.string().nullable(),
  caps: z.array(z.string()),
  caveats: z.array(z.string()).describe('the caveats the session was started with, as its tokens carry them'),
  created_by: z.string().describe('on whose behalf it acts: `token:<id>`, `user:<id>` or `gateway:<id>`'),
  created_at: z.string(),
  expires_at: z.string(),
  ended_at: z.string().nullable(),
  ended_by: z.string().nullable(),
  state: z.enum(['live', 'ended', 'expired']),
});

export const startedView = z.object({
  id: z.string(),
  caveat_token: z.string().describe('shown once; the only credential a sandbox should hold'),
  expires_at: z.string(),
  caps: z.array(z.string()),
});

export const messageBody = z
  .object({
    text: z.string().min(1).max(8_000),
    level: z
      .enum(['info', 'warning', 'question'])
      .default('info')
      .describe("the agent's: how urgently it needs its people"),
  })
  .strict();

export const messagesQuery = pageQuery()
  .extend({
    after: z
      .uuid()
      .optional()
      .describe(
        "the id of the last message the caller has: only messages after it (the long-poll's form; `cursor` wins when both are given)",
      ),
    wait: z.coerce
      .number()
      .int()
      .min(0)
      .max(120)
      .default(0)
      .describe('long-poll: an empty page waits until a message arrives, or this many seconds'),
  })
  .strict();

export const messageView = z.object({
  id: z.string(),
  direction: z.enum(['agent', 'people']),
  text: z.string(),
  level: z.string(),
  author: z.string(),
  created_at: z.string(),
});

export const sessionsPage = legacyPageView(sessionView, 'sessions');
export const messagesPage = legacyPageView(messageView, 'messages');

export function toSessionView(session: SessionRecord, now: Date): z.infer<typeof sessionView> {
  return {
    id: session.id,
    workspace: session.workspaceSlug,
    name: session.name,
    agent: session.agent,
    caps: session.caps,
    caveats: session.caveats,
    created_by: `${session.creatorKind}:${session.creatorId}`,
    created_at: session.createdAt.toISOString(),
    expires_at: session.expiresAt.toISOString(),
    ended_at: session.endedAt?.toISOString() ?? null,
    ended_by: session.endedBy,
    state: session.endedAt ? 'ended' : session.expiresAt <= now ? 'expired' : 'live',
  };
}

export function toMessageView(message: MessageRecord): z.infer<typeof messageView> {
  return {
    id: message.id,
    direction: message.direction,
    text: message.text,
    level: message.level,
    author: message.author,
    created_at: message.createdAt.toISOString(),
  };
}
