import { Controller, Param } from '@nestjs/common';
import { z } from 'zod';
import { OrgScope, TenantScope } from '@aileron/auth';
import { Route } from '@aileron/http';
import { SESSION_KEY_ID } from './domain/caveat-token';
import { SessionKeys } from './session-keys.service';

const keyView = z.object({ key_id: z.string(), created_at: z.string(), retired_at: z.string().nullable().describe('retired keys verify tokens minted before the rotation until removed') });
const keyParams = z.object({ id: z.string().regex(SESSION_KEY_ID, 'must be a session key id (sk-…)') });

/** The organisation's session root keys: rotate (old tokens keep working), then remove the old key (they stop). */
@Controller()
export class SessionKeysController {
  constructor(private readonly keys: SessionKeys) {}

  @Route({
    method: 'GET',
    path: '/v1/session-keys',
    summary: "The organisation's session root keys (ids and dates; the keys never leave the server)",
    tag: 'sessions',
    permission: 'organization.manage',
    tenancy: 'organization',
    response: z.object({ keys: z.array(keyView) }),
  })
  async list(@TenantScope() scope: OrgScope): Promise<{ keys: z.infer<typeof keyView>[] }> {
    return { keys: await this.keys.list(scope) };
  }

  @Route({
    method: 'POST',
    path: '/v1/session-keys/rotate',
    summary: 'Start minting session tokens with a new root key; tokens of the old one keep verifying until it is removed',
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
