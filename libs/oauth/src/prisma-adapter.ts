import { hash } from 'node:crypto';
import type { Adapter, AdapterPayload } from 'oidc-provider';
import type { SystemScope } from '@aileron/auth';
import type { Clock } from '@aileron/clock';
import type { OauthRepository } from './oauth.repository';

/**
 * The models whose ids are not secrets: a client's id is public, a grant's is
 * named inside every token issued under it. Every other id (codes, tokens,
 * the provider's session and interaction cookies) is what its holder presents,
 * so only its hash is stored: a database dump hands out no working credential.
 */
const PLAIN_IDS = new Set(['Client', 'Grant']);

export interface AdapterHooks {
  /** a client_id the database does not hold: a Client ID Metadata Document's URL, resolved here */
  resolveClient(id: string): Promise<AdapterPayload | undefined>;
  /** access tokens were destroyed (revoked, rotated away): caches of them must go */
  accessTokensEnded(): Promise<void>;
}

/**
 * oidc-provider's storage on PostgreSQL (or PGlite), one adapter per model:
 * each replica reads what another wrote, nothing lives in a process's memory.
 */
export class PrismaAdapter implements Adapter {
  private readonly hashed: boolean;

  constructor(
    private readonly model: string,
    private readonly repository: OauthRepository,
    private readonly system: SystemScope,
    private readonly clock: Clock,
    private readonly hooks: AdapterHooks,
  ) {
    this.hashed = !PLAIN_IDS.has(model);
  }

  private key(id: string): string {
    return this.hashed ? hash('sha256', id, 'base64url') : id;
  }

  async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
    // the id is the credential: it is kept only as the key's hash, never in the payload
    const { jti: _jti, ...stored } = payload;
    await this.repository.upsertEntry(this.system, this.model, this.key(id), {
      payload: (this.hashed ? stored : payload) as Record<string, unknown>,
      grantId: payload.grantId ?? (this.model === 'Grant' ? id : null),
      uid: typeof payload.uid === 'string' ? payload.uid : null,
      expiresAt: expiresIn ? new Date(this.clock.now() + expiresIn * 1000) : null,
    });
  }

  async find(id: string): Promise<AdapterPayload | undefined> {
    const found = await this.repository.findEntry(this.system, this.model, this.key(id), this.clock.date());
    if (!found) return this.model === 'Client' ? this.hooks.resolveClient(id) : undefined;
    return this.withState(found, id);
  }

  async findByUid(uid: string): Promise<AdapterPayload | undefined> {
    const found = await this.repository.findEntryByUid(this.system, this.model, uid, this.clock.date());
    // the session's id was only stored hashed; the provider reads it from the cookie, not from here
    return found ? this.withState(found, undefined) : undefined;
  }

  async findByUserCode(): Promise<undefined> {
    // the device flow is not enabled
    return undefined;
  }

  async consume(id: string): Promise<void> {
    await this.repository.consumeEntry(this.system, this.model, this.key(id), this.clock.date());
  }

  async destroy(id: string): Promise<void> {
    await this.repository.destroyEntry(this.system, this.model, this.key(id));
    if (this.model === 'AccessToken') await this.hooks.accessTokensEnded();
  }

  async revokeByGrantId(grantId: string): Promise<void> {
    await this.repository.destroyEntriesOfGrant(this.system, this.model, grantId);
    if (this.model === 'AccessToken') await this.hooks.accessTokensEnded();
  }

  private withState(found: { payload: Record<string, unknown>; consumedAt: Date | null }, id: string | undefined) {
    return {
      ...found.payload,
      ...(this.hashed && id !== undefined ? { jti: id } : {}),
      ...(found.consumedAt ? { consumed: Math.floor(found.consumedAt.getTime() / 1000) } : {}),
    } as AdapterPayload;
  }
}
