import { z } from 'zod';
import { slug, uuid } from '@aileron/auth';
import { pageQuery } from '@aileron/http';
import { OFFLINE_MODES } from './domain/policy-bundle';
import type { GatewayRecord, GatewaySettingsRecord } from './gateway.repository';

export const wsParams = z.object({ ws: slug });
export const gatewayParams = z.object({ ws: slug, id: uuid });
const group = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'letters, digits, "_", "." and "-", at most 64 characters');
const groups = z.array(group).max(32);

/** How long a gateway token may be given to live, from enrolment or from a rotation. */
const tokenLifetime = z
  .number()
  .int()
  .min(60)
  .max(366 * 24 * 3600);

export const enrollmentCodeBody = z
  .object({
    expires_in_seconds: z
      .number()
      .int()
      .min(60)
      .max(30 * 24 * 3600)
      .default(3600),
    groups: groups.default([]).describe('rollout groups the enrolled gateway joins'),
    token_expires_in_seconds: tokenLifetime
      .optional()
      .describe(
        "the enrolled gateway's token stops working this long after enrolment; left out, it works until rotated or revoked",
      ),
  })
  .strict();
export const enrollmentCodeView = z.object({
  code: z.string().describe('shown once; good for one enrolment'),
  expires_at: z.string(),
  groups: z.array(z.string()),
  token_expires_in_seconds: z.number().int().nullable(),
});

export const enrollBody = z
  .object({ enrollment_code: z.string().min(1).max(200), name: z.string().trim().min(1).max(200) })
  .strict();
export const enrolledView = z.object({
  gateway_id: z.string(),
  token: z.string().describe('the gateway token, shown once'),
  organization: z.string(),
  workspace: z.string(),
  groups: z.array(z.string()),
  catalog_url: z.string(),
  policy_url: z.string(),
  keys_url: z.string(),
  token_expires_at: z
    .string()
    .nullable()
    .describe('when the token stops working (the code gave it a lifetime); null: until rotated or revoked'),
});

export const resolveSecretsBody = z
  .object({
    server: z.string().min(1).max(64).describe('a local server of the catalog the gateway fetched'),
    version: z.string().min(1).max(64).describe('the version that catalog gives this gateway'),
  })
  .strict();
export const resolvedSecretsView = z.object({
  server: z.string(),
  version: z.string(),
  secrets: z
    .array(
      z.object({
        ref: z.string().describe("the reference as the entry's env names it"),
        path: z.string(),
        version: z.number().int().describe("the secret's version read (its newest)"),
        value: z.string().describe('the value: held in memory for the process it is for, never written down'),
      }),
    )
    .describe("one per distinct `vault://` reference of the entry's env, each read audited as `secret.read`"),
});

export const gatewayView = z.object({
  id: z.string(),
  name: z.string(),
  groups: z.array(z.string()),
  prefix: z.string(),
  enrolled_at: z.string(),
  last_seen_at: z.string().nullable(),
  revoked_at: z.string().nullable(),
  enrolled_by: z
    .string()
    .nullable()
    .describe('who made the enrolment code it used (`user:<id>`, `token:<id>`); null if not recorded'),
  token_expires_at: z.string().nullable().describe('when its token stops working; null: until rotated or revoked'),
  previous_token_valid_until: z
    .string()
    .nullable()
    .describe('the end of the grace period of the token the last rotation replaced; null when there is none'),
});

export const rotateBody = z
  .object({
    grace_seconds: z
      .number()
      .int()
      .min(0)
      .max(7 * 24 * 3600)
      .default(3600)
      .describe('how long the token being replaced keeps working (0: it stops at once); never past its own expiry'),
    expires_in_seconds: tokenLifetime
      .optional()
      .describe('when the new token stops working; left out, it works until rotated or revoked'),
  })
  .strict();
export const rotatedView = gatewayView.extend({ token: z.string().describe('the new gateway token, shown once') });

export const gatewaysQuery = pageQuery().extend({
  enrolled_by: uuid
    .optional()
    .describe(
      "a user's id: only the gateways enrolled with codes that person made, or an API token acting for them made",
    ),
});

export const revokeByPersonBody = z
  .object({
    enrolled_by: uuid.describe(
      "a user's id: the workspace's gateways enrolled with codes that person, or an API token acting for them, made",
    ),
  })
  .strict();
export const revokedByPersonView = z.object({
  revoked: z.array(gatewayView).describe('the gateways this call revoked; those revoked before are left out'),
});

export const updateGatewayBody = z.object({ groups }).strict();

export const settingsBody = z
  .object({
    allow_local_servers: z.boolean().describe("may a developer's local config add servers of its own"),
    offline_mode: z
      .enum(OFFLINE_MODES)
      .describe(
        'what a gateway does when it cannot reach the control plane, and once its bundle expires (ADR-0001; the bundle spells it out in `offline`)',
      ),
    max_stale_seconds: z
      .number()
      .int()
      .min(60)
      .max(30 * 24 * 3600)
      .describe('how long a bundle stays valid after it is issued'),
  })
  .strict();
export const settingsView = settingsBody.extend({ updated_at: z.string().nullable() });

export const keysView = z.object({
  keys: z.array(
    z.object({
      kty: z.literal('OKP'),
      crv: z.literal('Ed25519'),
      alg: z.literal('EdDSA'),
      use: z.literal('sig'),
      kid: z.string(),
      x: z.string(),
      created_at: z.string(),
    }),
  ),
});

export function toGatewayView(g: GatewayRecord): z.infer<typeof gatewayView> {
  return {
    id: g.id,
    name: g.name,
    groups: g.groups,
    prefix: g.prefix,
    enrolled_at: g.enrolledAt.toISOString(),
    last_seen_at: g.lastSeenAt?.toISOString() ?? null,
    revoked_at: g.revokedAt?.toISOString() ?? null,
    enrolled_by: g.enrolledBy,
    token_expires_at: g.tokenExpiresAt?.toISOString() ?? null,
    previous_token_valid_until: g.previousTokenValidUntil?.toISOString() ?? null,
  };
}

export function toSettingsView(s: GatewaySettingsRecord): z.infer<typeof settingsView> {
  return {
    allow_local_servers: s.allowLocalServers,
    offline_mode: s.offlineMode,
    max_stale_seconds: s.maxStaleSeconds,
    updated_at: s.updatedAt?.toISOString() ?? null,
  };
}
