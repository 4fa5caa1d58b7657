import { z } from 'zod';
import { slug } from '@aileron/auth';
import { oauthOf, SERVER_NAME } from './domain/catalog-entry';
import type { AssignmentRecord, CatalogEntryRecord } from './catalog.repository';

const serverName = z.string().regex(SERVER_NAME, 'not a server name');
export const serverParams = z.object({ name: serverName });
export const wsServerParams = z.object({ ws: slug, name: serverName });
export const wsParams = z.object({ ws: slug });
const version = z.string().min(1).max(64);

export const versionView = z.object({
  version: z.string(),
  created_at: z.string(),
  created_by: z.string().nullable(),
  definition: z
    .record(z.string(), z.unknown())
    .describe('mode, transport, command/args, image or url, env (vault:// references), tool_prefix, …'),
});

export const entryView = z.object({
  name: z.string(),
  enabled: z.boolean().describe('false when the kill switch is on: the server is off in every workspace'),
  disabled_reason: z.string().nullable(),
  disabled_at: z.string().nullable(),
  created_at: z.string(),
  latest_version: z.string().nullable().describe('highest by semantic-version precedence'),
  versions: z.array(versionView),
});

export const statusBody = z
  .object({ enabled: z.boolean(), reason: z.string().trim().min(1).max(500).optional() })
  .strict();
export const assignBody = z.object({ version }).strict();
export const rolloutBody = z
  .object({
    version,
    gateways: z
      .array(z.string().min(1).max(200))
      .max(1000)
      .default([])
      .describe('gateway ids or names that get the new version first'),
    groups: z.array(z.string().min(1).max(100)).max(100).default([]).describe('gateway groups that get it first'),
    percent: z
      .number()
      .int()
      .min(0)
      .max(100)
      .default(0)
      .describe("share of the workspace's gateways, stable per gateway"),
  })
  .strict();

export const assignmentView = z.object({
  server: z.string(),
  enabled: z.boolean(),
  disabled_reason: z.string().nullable(),
  version: z.string().describe('the pinned version everyone gets unless a rollout selects them'),
  mode: z.enum(['local', 'remote']),
  transport: z.enum(['stdio', 'streamable_http']),
  auth: z
    .enum(['oauth'])
    .nullable()
    .describe('oauth: the pool signs in to the upstream with OAuth, on connections people make (docs/oauth.md)'),
  connections: z
    .enum(['per_person', 'per_workspace'])
    .nullable()
    .describe("with auth oauth: each person's own connection, or the workspace's one"),
  rollout: z
    .object({
      version: z.string(),
      gateways: z.array(z.string()),
      groups: z.array(z.string()),
      percent: z.number().int(),
    })
    .nullable(),
  updated_at: z.string(),
  updated_by: z.string().nullable(),
});

export function toEntryView(entry: CatalogEntryRecord, latest: string | null): z.infer<typeof entryView> {
  return {
    name: entry.name,
    enabled: entry.enabled,
    disabled_reason: entry.disabledReason,
    disabled_at: entry.disabledAt?.toISOString() ?? null,
    created_at: entry.createdAt.toISOString(),
    latest_version: latest,
    versions: entry.versions.map((v) => ({
      version: v.version,
      created_at: v.createdAt.toISOString(),
      created_by: v.createdBy,
      definition: v.definition,
    })),
  };
}

export function toAssignmentView(a: AssignmentRecord): z.infer<typeof assignmentView> {
  const oauth = oauthOf(a.pinned.definition as Record<string, unknown>);
  return {
    server: a.name,
    enabled: a.enabled,
    disabled_reason: a.disabledReason,
    version: a.pinned.version,
    mode: a.pinned.definition.mode,
    transport: a.pinned.definition.transport,
    auth: oauth ? 'oauth' : null,
    connections: oauth?.connections ?? null,
    rollout: a.rollout
      ? {
          version: a.rollout.version.version,
          gateways: a.rollout.gateways,
          groups: a.rollout.groups,
          percent: a.rollout.percent,
        }
      : null,
    updated_at: a.updatedAt.toISOString(),
    updated_by: a.updatedBy,
  };
}
