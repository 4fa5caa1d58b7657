import { Body, Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, Principal, slug, TenantScope, WorkspaceScope } from '@aileron/auth';
import { LEGACY_REMOVAL, legacyPageView, ListCursor, pageQuery, Route, textKey, withLegacyKey } from '@aileron/http';
import { MAX_PATH_LENGTH, MAX_VALUE_BYTES } from './domain/envelope';
import { SecretMetadata } from './vault.repository';
import { VaultService } from './vault.service';

const wsParams = z.object({ ws: slug });
const pathParams = z.object({
  ws: slug,
  '*': z.string().min(1).max(MAX_PATH_LENGTH).describe('the secret path, e.g. `github/token`'),
});
const deliverToGateways = z
  .boolean()
  .describe(
    'may gateways receive the value, for local servers whose catalog entry names it (POST /v1/gateway/secrets/resolve); each read is audited',
  );
const putBody = z.object({
  value: z.string().max(MAX_VALUE_BYTES).describe('the secret; stored encrypted and never returned'),
  deliver_to_gateways: deliverToGateways
    .optional()
    .describe(
      'may gateways receive the value, for local servers whose catalog entry names it; left out, a new secret is not deliverable and an existing one keeps its setting',
    ),
});
const patchBody = z.object({ deliver_to_gateways: deliverToGateways }).strict();
/** Up to 500 a page, as before pages had one size: the CLI of the last release asks for 500. */
const listQuery = pageQuery({ max: 500 }).extend({
  prefix: z.string().max(MAX_PATH_LENGTH).optional(),
  after: z
    .string()
    .max(MAX_PATH_LENGTH)
    .optional()
    .meta({ deprecated: true })
    .describe(`secrets after this path; deprecated (use \`cursor\`), removed in ${LEGACY_REMOVAL}`),
});

const metadataView = z.object({
  path: z.string(),
  ref: z.string().describe('what a catalog entry puts in `env` to use it'),
  version: z.number().int().describe('the newest version'),
  versions: z.array(z.number().int()).describe('versions kept'),
  created_at: z.string(),
  created_by: z.string().nullable(),
  updated_at: z.string(),
  updated_by: z.string().nullable(),
  last_read_at: z.string().nullable(),
  last_read_by: z.string().nullable(),
  deliver_to_gateways: z.boolean().describe('whether gateways may receive the value for local servers'),
});

function view(secret: SecretMetadata): z.infer<typeof metadataView> {
  return {
    path: secret.path,
    ref: `vault://${secret.path}`,
    version: secret.latestVersion,
    versions: secret.versions,
    created_at: secret.createdAt.toISOString(),
    created_by: secret.createdBy,
    updated_at: secret.updatedAt.toISOString(),
    updated_by: secret.updatedBy,
    last_read_at: secret.lastReadAt?.toISOString() ?? null,
    last_read_by: secret.lastReadBy,
    deliver_to_gateways: secret.deliverToGateways,
  };
}

const PATH_EXAMPLE = { '*': 'github/token' };

const secretsPage = legacyPageView(metadataView, 'secrets').extend({
  next_after: z
    .string()
    .nullable()
    .meta({ deprecated: true })
    .describe(
      `the \`after\` of the next page, null on the last; deprecated (use \`next_cursor\`), removed in ${LEGACY_REMOVAL}`,
    ),
});
const secretsCursor = new ListCursor('secrets', textKey);

@Controller()
export class VaultController {
  constructor(private readonly vault: VaultService) {}

  @Route({
    method: 'PUT',
    path: '/v1/workspaces/:ws/secrets/*',
    summary: 'Write a secret (a new version)',
    description:
      'The value is encrypted at once and can never be read back through any API; remote servers in the pool get it through `vault://<path>` references, and gateways, for local servers, only when `deliver_to_gateways` is true. Running pool instances that use the secret are replaced on every replica.',
    tag: 'secrets',
    permission: 'secret.write',
    tenancy: 'workspace',
    params: pathParams,
    body: putBody,
    response: metadataView,
    example: { params: PATH_EXAMPLE, body: { value: 'ghp_example', deliver_to_gateways: false } },
  })
  async put(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof pathParams>,
    @Body() body: z.infer<typeof putBody>,
  ): Promise<z.infer<typeof metadataView>> {
    return view(
      await this.vault.put(
        caller,
        scope,
        params['*'],
        body.value,
        body.deliver_to_gateways === undefined ? {} : { deliverToGateways: body.deliver_to_gateways },
      ),
    );
  }

  @Route({
    method: 'PATCH',
    path: '/v1/workspaces/:ws/secrets/*',
    summary: 'Mark a secret deliverable to gateways, or not, without writing a new value',
    description:
      'A change is a `secret.delivery_changed` audit record; setting what the secret already has records nothing.',
    tag: 'secrets',
    permission: 'secret.write',
    tenancy: 'workspace',
    params: pathParams,
    body: patchBody,
    response: metadataView,
    example: { params: PATH_EXAMPLE, body: { deliver_to_gateways: true } },
  })
  async patch(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof pathParams>,
    @Body() body: z.infer<typeof patchBody>,
  ): Promise<z.infer<typeof metadataView>> {
    return view(await this.vault.setDelivery(caller, scope, params['*'], body.deliver_to_gateways));
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/secrets',
    summary: "The workspace's secrets: metadata only, never values",
    tag: 'secrets',
    permission: 'secret.read',
    tenancy: 'workspace',
    params: wsParams,
    query: listQuery,
    response: secretsPage,
  })
  async list(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: z.infer<typeof listQuery>,
  ): Promise<z.infer<typeof secretsPage>> {
    const rows = await this.vault.list(
      scope,
      { ...(query.prefix ? { prefix: query.prefix } : {}) },
      secretsCursor.keyset(query, query.after),
    );
    const page = secretsCursor.page(rows, query, (s) => s.path, view);
    return {
      ...withLegacyKey(page, 'secrets'),
      next_after: page.next_cursor === null ? null : page.items[page.items.length - 1]!.path,
    };
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/secrets/*',
    summary: "One secret's metadata (versions, who wrote and read it when); never its value",
    tag: 'secrets',
    permission: 'secret.read',
    tenancy: 'workspace',
    params: pathParams,
    response: metadataView,
    example: { params: PATH_EXAMPLE },
  })
  async get(
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof pathParams>,
  ): Promise<z.infer<typeof metadataView>> {
    return view(await this.vault.metadata(scope, params['*']));
  }

  @Route({
    method: 'DELETE',
    path: '/v1/workspaces/:ws/secrets/*',
    summary: 'Delete a secret and all its versions (the audit log keeps the trail)',
    tag: 'secrets',
    permission: 'secret.write',
    tenancy: 'workspace',
    params: pathParams,
    status: 204,
    example: { params: PATH_EXAMPLE },
  })
  async remove(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param() params: z.infer<typeof pathParams>,
  ): Promise<void> {
    await this.vault.remove(caller, scope, params['*']);
  }

  @Route({
    method: 'POST',
    path: '/v1/workspaces/:ws/vault/rotate',
    summary: "Rotate the workspace's vault key",
    description:
      'Every data key is re-wrapped under a new workspace key in one transaction; values are not re-encrypted and nothing waits.',
    tag: 'secrets',
    permission: 'vault.rotate',
    tenancy: 'workspace',
    params: wsParams,
    response: z.object({ key_version: z.number().int(), rewrapped: z.number().int() }),
  })
  rotate(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
  ): Promise<{ key_version: number; rewrapped: number }> {
    return this.vault.rotateWorkspaceKey(caller, scope);
  }

  @Route({
    method: 'POST',
    path: '/v1/vault/rewrap-root',
    summary: 'Seal every stored key under the current root key (platform operators)',
    description:
      'Root key rotation: put the new key first in AILERON_ROOT_KEY (or the key file) and keep the old one after it, restart the replicas one by one, call this, then drop the old key.',
    tag: 'secrets',
    tenancy: 'platform',
    response: z.object({ root_key_id: z.string(), workspace_keys: z.number().int(), signing_keys: z.number().int() }),
  })
  rewrapRoot(): Promise<{ root_key_id: string; workspace_keys: number; signing_keys: number }> {
    return this.vault.rewrapUnderCurrentRoot();
  }
}
