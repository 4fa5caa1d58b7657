import { z } from 'zod';
import { browserSignInIssuerProblem, role, ROLES, slug, uuid } from '@aileron/auth';

export const wsParams = z.object({ ws: slug.describe('workspace slug') });
export const userParams = z.object({ id: uuid });
export const memberParams = z.object({ ws: slug, user_id: uuid });

export const organizationView = z.object({
  id: z.string(),
  slug: z.string(),
  name: z.string(),
  created_at: z.string(),
});
export const createOrganizationBody = z.object({ slug, name: z.string().trim().min(1).max(200) }).strict();
export const createdOrganization = z.object({
  organization: organizationView,
  owner_token: z.object({ id: z.string(), token: z.string().describe('shown once; store it now') }),
});

export const POLICY_DEFAULTS = ['allow', 'deny'] as const;
export type PolicyDefault = (typeof POLICY_DEFAULTS)[number];
const policyDefault = z
  .enum(POLICY_DEFAULTS)
  .describe('what the policy decides when no rule applies and the document names no default');
export const workspaceView = z.object({
  id: z.string(),
  slug: z.string(),
  name: z.string(),
  policy_default: policyDefault,
  created_at: z.string(),
  role: role.optional(),
});
export const createWorkspaceBody = z
  .object({ slug, name: z.string().trim().min(1).max(200), policy_default: policyDefault.default('deny') })
  .strict();
export const updateWorkspaceBody = z.object({ name: z.string().trim().min(1).max(200) }).strict();

export const userView = z.object({
  id: z.string(),
  email: z.string().nullable(),
  name: z.string().nullable(),
  role,
  linked: z.boolean().describe('true once the user has signed in through the identity provider'),
  created_at: z.string(),
  last_login_at: z.string().nullable(),
  status: z
    .enum(['active', 'deactivated'])
    .describe('deactivated: offboarded, no sign-in and no credential of theirs works until reactivated'),
  deactivated_at: z.string().nullable(),
});
export const createUserBody = z
  .object({ email: z.email(), name: z.string().trim().min(1).max(200).optional(), role: role.default('member') })
  .strict();
export const updateUserBody = z.object({ role }).strict();

export const memberView = z.object({
  user_id: z.string(),
  email: z.string().nullable(),
  name: z.string().nullable(),
  role,
  created_at: z.string(),
});
export const putMemberBody = z.object({ role }).strict();

const claimName = z.string().trim().min(1).max(200);
const CLAIM_DEFAULTS = { subject: 'sub', email: 'email', name: 'name', groups: 'groups' };
export const identityProviderBody = z
  .object({
    issuer: z.url({ protocol: /^https?$/ }).describe('the `iss` of the IdP tokens'),
    jwks_url: z.url({ protocol: /^https?$/ }),
    audience: z
      .string()
      .min(1)
      .max(500)
      .optional()
      .describe('the `aud` the IdP puts in tokens meant for Aileron; required unless allow_any_audience'),
    allow_any_audience: z
      .boolean()
      .default(false)
      .describe(
        'accept tokens whatever their audience: any token the IdP issued to any of its clients then signs people in here; only if the IdP has no audience for Aileron',
      ),
    trust_unverified_email: z
      .boolean()
      .default(false)
      .describe(
        'link a first sign-in to a pre-added user by an e-mail the IdP does not mark `email_verified: true`; only for IdPs that verify every address',
      ),
    claims: z
      .object({
        subject: claimName.default('sub'),
        email: claimName.default('email'),
        name: claimName.default('name'),
        role: claimName
          .nullable()
          .optional()
          .describe('claim that names a role (looked up in role_mapping); null or absent: none'),
        groups: claimName
          .default('groups')
          .describe("the user's groups; they count for approval routes' `group` approvers"),
      })
      .strict()
      .default(CLAIM_DEFAULTS),
    role_mapping: z
      .record(z.string().min(1), role)
      .default({})
      .describe('claim value → role, e.g. {"sec-team": "admin"}'),
    default_role: role.default('member'),
    client_id: z
      .string()
      .min(1)
      .max(500)
      .optional()
      .describe(
        'OIDC client for browser sign-in (the review page); register `<AILERON_PUBLIC_URL>/v1/auth/oidc/callback` as its redirect URI',
      ),
    client_secret: z
      .string()
      .min(1)
      .max(2000)
      .optional()
      .describe(
        'write-only: sealed, never returned; left out with an unchanged `client_id`, the stored one stays; no secret at all: a public client (PKCE only)',
      ),
    scopes: z
      .array(z.string().regex(/^[\x21\x23-\x5B\x5D-\x7E]+$/, 'must be an OAuth scope token'))
      .max(20)
      .optional()
      .describe('scopes asked for besides `openid`; default `email profile`'),
  })
  .strict()
  .superRefine((body, ctx) => {
    if (body.audience === undefined && !body.allow_any_audience) {
      ctx.addIssue({
        code: 'custom',
        path: ['audience'],
        message: 'is required: the `aud` its tokens for Aileron carry (or set allow_any_audience: true to accept any)',
      });
    }
    if (body.audience !== undefined && body.allow_any_audience)
      ctx.addIssue({
        code: 'custom',
        path: ['allow_any_audience'],
        message: 'give either an audience or allow_any_audience, not both',
      });
    if (body.client_secret !== undefined && body.client_id === undefined)
      ctx.addIssue({ code: 'custom', path: ['client_secret'], message: 'needs a client_id' });
    const problem = body.client_id !== undefined ? browserSignInIssuerProblem(body.issuer) : null;
    if (problem) ctx.addIssue({ code: 'custom', path: ['issuer'], message: problem });
  });
export const identityProviderView = z.object({
  issuer: z.string(),
  jwks_url: z.string(),
  audience: z.string().nullable(),
  allow_any_audience: z.boolean(),
  trust_unverified_email: z.boolean(),
  claims: z.object({
    subject: z.string(),
    email: z.string(),
    name: z.string(),
    role: z.string().nullable(),
    groups: z.string(),
  }),
  role_mapping: z.record(z.string(), z.enum(ROLES)),
  default_role: role,
  client_id: z.string().nullable().describe('null: no browser sign-in'),
  client_secret_set: z.boolean().describe('whether a client secret is stored (it is never shown)'),
  scopes: z.array(z.string()),
});

export type CreateOrganizationBody = z.infer<typeof createOrganizationBody>;
export type CreateWorkspaceBody = z.infer<typeof createWorkspaceBody>;
export type CreateUserBody = z.infer<typeof createUserBody>;
export type IdentityProviderBody = z.infer<typeof identityProviderBody>;
