import { Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { OrgScope, TenantScope } from '@aileron/auth';
import { createdAtKey, legacyPageView, ListCursor, PageQuery, pageQuery, Route, withLegacyKey } from '@aileron/http';
import { SESSION_KEY_ID } from './domain/caveat-token';
import { AgentSessionKeys } from './agent-session-keys.service';

const keyView = z.object({
  key_id: z.string(),
  created_at: z.string(),
  retired_at: z.string().nullable().describe('retired keys verify tokens minted before the rotation until removed'),
});
const keysPage = legacyPageView(keyView, 'keys');
const keysCursor = new ListCursor('session-keys', createdAtKey);
const keyParams = z.object({ id: z.string().regex(SESSION_KEY_ID, 'must be a session key id (sk-…)') });

/** The organisation's session root keys: rotate (old tokens keep working), then remove the old key (they stop). */
@Controller()
export class AgentSessionKeysController {
  constructor(private readonly keys: AgentSessionKeys) {}

  @Route({
    method: 'GET',
    path: '/v1/session-keys',
    summary: "The organisation's session root keys (ids and dates; the keys never leave the server), newest first",
    tag: 'sessions',
    permission: 'organization.manage',
    tenancy: 'organization',
    query: pageQuery(),
    response: keysPage,
  })
  async list(@TenantScope() scope: OrgScope, @Query() query: PageQuery): Promise<z.infer<typeof keysPage>> {
    const rows = await this.keys.list(scope, keysCursor.keyset(query));
    const page = keysCursor.page(
      rows,
      query,
      (k) => ({ createdAt: k.createdAt, id: k.keyId }),
      (k) => ({
        key_id: k.keyId,
        created_at: k.createdAt.toISOString(),
        retired_at: k.retiredAt?.toISOString() ?? null,
      }),
    );
    return withLegacyKey(page, 'keys');
  }

  @Route({
    method: 'POST',
    path: '/v1/session-keys/rotate',
    summary:
      'Start minting session tokens with a new root key; tokens of the old one keep verifying until it is removed',
    tag: 'sessions',
    permission: 'organization.manage',
    tenancy: 'organization',
    response: z.object({ key_id: z.string() }),
    status: 201,
  })
  rotate(@TenantScope() scope: OrgScope): Promise<{ key_id: string }> {
    return this.keys.rotate(scope);
  }

  @Route({
    method: 'DELETE',
    path: '/v1/session-keys/:id',
    summary: 'Remove a retired session root key: every token chained on it is refused, on every replica',
    tag: 'sessions',
    permission: 'organization.manage',
    tenancy: 'organization',
    params: keyParams,
    status: 204,
    example: { params: { id: 'sk-000000000000' } },
  })
  async remove(@TenantScope() scope: OrgScope, @Param() params: z.infer<typeof keyParams>): Promise<void> {
    await this.keys.remove(scope, params.id);
  }
}
