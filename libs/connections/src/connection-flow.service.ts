import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { Inject, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import {
  AccessService,
  allows,
  describePrincipal,
  Offboardee,
  Offboarding,
  OffboardingContext,
  OrgScope,
  Principal,
  WorkspaceScope,
} from '@aileron/auth';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { CatalogService, ConnectionMode, oauthOf } from '@aileron/catalog';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DatabaseService, Keyset, Transaction } from '@aileron/database';
import { ConflictError, DomainError, ForbiddenError, NotFoundError } from '@aileron/errors';
import { outboundPolicyOf } from '@aileron/net';
import { OutboxService } from '@aileron/outbox';
import { VaultService } from '@aileron/vault';
import type {
  OAuthClientInformationFull,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js';
import { ConnectionChange, ConnectionEvents } from './connection-events';
import { CALLBACK_PATH, CLIENT_METADATA_PATH, connectUrl, WORKSPACE_SUBJECT } from './domain/connection';
import { ConnectionRecord, ConnectionsRepository } from './connections.repository';
import { registrationKey, UpstreamAuthorization, UpstreamOauth, UpstreamOauthError } from './upstream-oauth';

/** long enough to sign in at the upstream, short enough that an abandoned one is soon gone */
const START_TTL_SECONDS = 600;

/** What a connection being made needs from the catalog. */
interface OauthServer {
  server: string;
  url: string;
  mode: ConnectionMode;
  clientId: string | undefined;
  clientSecretRef: string | undefined;
  scopes: string[] | undefined;
}

/** The pool's registration metadata: the SDK's type, and the OpenID Connect field it does not know yet. */
type PoolClientMetadata = OAuthClientMetadata & { application_type: 'web' };

/** The pool's connection to an upstream could not be made; in our words, with a stable code. */
export class ConnectionError extends DomainError {}

/** Where the browser goes, and the cookie that binds the start to it. */
export interface Begun {
  location: string;
  binding: string;
}

/** How a callback ended, for the page the person sees. */
export type Finished = { ok: true; connection: ConnectionRecord } | { ok: false; title: string; message: string };

/**
 * Making, listing and ending the pool's OAuth connections to upstream MCP
 * servers. A connection is made in the browser of the person it is for (or of
 * the admin who makes a workspace's): the connect URL, once they are signed
 * in to the console, sends them to the upstream's authorization server with a
 * `state` and PKCE; the callback takes that state once, within ten minutes,
 * only in the browser that began it (a cookie whose hash the start keeps),
 * exchanges the code and seals the tokens in the vault.
 */
@Injectable()
export class ConnectionFlow implements OnModuleInit {
  private readonly logger = new Logger('Connections');
  private readonly oauth: UpstreamOauth;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly db: DatabaseService,
    private readonly repository: ConnectionsRepository,
    private readonly catalog: CatalogService,
    private readonly vault: VaultService,
    private readonly outbox: OutboxService,
    private readonly access: AccessService,
    private readonly offboarding: Offboarding,
    private readonly events: ConnectionEvents,
    private readonly clock: Clock,
  ) {
    this.oauth = new UpstreamOauth(outboundPolicyOf(config));
  }

  onModuleInit(): void {
    // a person's own connections act for them upstream: they end with the person
    this.offboarding.register({
      name: 'upstream connections',
      order: 26,
      end: (scope, person, context) => this.offboard(scope, person, context),
    });
  }

  /** The pool's Client ID Metadata Document: its client_id is the URL it is served at. */
  clientMetadataDocument(): PoolClientMetadata & { client_id: string } {
    return { client_id: this.clientMetadataUrl(), ...this.clientMetadata('none') };
  }

  /**
   * `POST …/connections`: checks the server and the caller, discovers the
   * upstream's authorization and registers the pool there now, so that a
   * mistake is told here rather than in the browser, and answers where a
   * person connects.
   */
  async prepare(scope: WorkspaceScope, server: string) {
    const target = await this.oauthServer(scope, server);
    this.mayConnect(scope, target);
    const upstream = await this.authorization(scope, target);
    return {
      server,
      connections: target.mode,
      authorizationUrl: connectUrl(this.config.publicUrl, scope.workspaceSlug, server),
      authorizationServer: upstream.authorizationServer,
      registration: upstream.client.registration,
    };
  }

  /**
   * A signed-in person opened the connect URL: a start of theirs (per person)
   * or the workspace's (per workspace, admins), and where their browser goes.
   */
  async begin(person: Principal, workspace: string, server: string): Promise<Begun> {
    const scope = await this.access.workspace(person, workspace, 'connection.create');
    const target = await this.oauthServer(scope, server);
    this.mayConnect(scope, target);
    const upstream = await this.authorization(scope, target);
    const subject = target.mode === 'per_workspace' ? WORKSPACE_SUBJECT : `user:${person.id}`;
    // what the upstream asked the earlier connection for beyond its scope (step-up) is asked for now
    const earlier = await this.repository.findBySubject(scope, server, subject);
    const scopes = unionOfScopes((await this.discovery(target)).scope, earlier?.upstream.stepUpScope);
    const state = randomBytes(32).toString('base64url');
    const binding = randomBytes(32).toString('base64url');
    const { url, verifier } = await this.oauth.authorizationUrl(upstream, scopes, state);
    await this.db.transaction(async (tx) => {
      const id = await this.repository.createStart(
        scope,
        {
          server,
          subject,
          userId: person.id,
          stateHash: sha256(state),
          bindingHash: sha256(binding),
          upstream,
          scope: scopes ?? null,
          expiresAt: new Date(this.clock.now() + START_TTL_SECONDS * 1000),
        },
        tx,
      );
      await this.vault.keep(scope, startKey(id), verifier, tx);
    });
    return { location: url.href, binding };
  }

  /**
   * The upstream sent the browser back. The start its `state` names is taken
   * (once, whatever happens next); it must be this browser's (the binding
   * cookie) and, when the browser is signed in, its person's; then the code
   * is exchanged and the tokens sealed.
   */
  async finish(
    query: {
      code?: string | undefined;
      state?: string | undefined;
      error?: string | undefined;
      iss?: string | undefined;
    },
    binding: string | undefined,
    signedIn: Principal | null,
  ): Promise<Finished> {
    const over = {
      ok: false as const,
      title: 'This connection request is over',
      message:
        'It expired, was already used, or was started in another browser. Start again from the console, the CLI or the link your MCP client showed.',
    };
    if (!query.state) return over;
    const taken = await this.db.transaction(async (tx) => {
      const start = await this.repository.takeStart(
        SystemScopes.system('connection callback'),
        sha256(query.state!),
        tx,
      );
      if (!start) return null;
      const scope = SystemScopes.workspace(start.organizationId, { id: start.workspaceId, slug: start.workspaceSlug });
      const verifier = await this.vault.kept(scope, startKey(start.id), tx);
      await this.vault.forget(scope, { in: [startKey(start.id)] }, tx);
      return { start, scope, verifier };
    });
    if (!taken || taken.verifier === null) return over;
    const { start, scope, verifier } = taken;
    if (start.expiresAt.getTime() <= this.clock.now()) return over;
    // another browser (a link someone was sent) finishes nothing: the code would become the starter's connection
    if (!binding || !sameHash(sha256(binding), start.bindingHash) || (signedIn && signedIn.id !== start.userId))
      return over;
    if (query.error || !query.code) {
      const said = /^[a-z_]{1,64}$/.test(query.error ?? '') ? query.error : 'no code';
      return {
        ok: false,
        title: 'Not connected',
        message: `${start.server}'s authorization server did not give access (${said}). Nothing was stored; you can start again.`,
      };
    }
    // RFC 9207: a code from another authorization server than the one asked (a mix-up) is never exchanged. The
    // issuer is its metadata's, compared exactly; one that published no metadata (the 2025-03-26 fallback) has none
    const issuer = start.upstream.metadata?.issuer;
    const mixedUp =
      query.iss !== undefined
        ? issuer !== undefined && query.iss !== issuer
        : (start.upstream.metadata as { authorization_response_iss_parameter_supported?: unknown } | null)
            ?.authorization_response_iss_parameter_supported === true;
    if (mixedUp)
      return {
        ok: false,
        title: 'Not connected',
        message: `The answer did not come from ${start.server}'s authorization server (its issuer ${query.iss === undefined ? 'was missing' : 'did not match'}). Nothing was stored; you can start again.`,
      };
    let tokens: OAuthTokens;
    try {
      tokens = await this.oauth.exchange(
        start.upstream,
        await this.clientSecret(scope, start.upstream),
        query.code,
        verifier,
      );
    } catch (error) {
      if (!(error instanceof UpstreamOauthError)) throw error;
      return {
        ok: false,
        title: 'Not connected',
        message: `${error.reason}. Nothing was stored; you can start again.`,
      };
    }
    const now = this.clock.date();
    const connection = await this.db.transaction(async (tx) => {
      const saved = await this.repository.saveConnected(
        scope,
        {
          server: start.server,
          subject: start.subject,
          userId: start.subject === WORKSPACE_SUBJECT ? null : start.userId,
          upstream: start.upstream,
          createdBy: `user:${start.userId}`,
          at: now,
          ...tokenFacts(tokens, start.scope, now),
        },
        tx,
      );
      await this.vault.keep(scope, connectionKey(saved.id), sealTokens(tokens), tx);
      await this.record(tx, scope, 'connection.connected', saved, `user:${start.userId}`, {
        authorization_server: start.upstream.authorizationServer,
        registration: start.upstream.client.registration,
        scope: saved.scope,
      });
      return saved;
    });
    await this.events.changed(changeOf(connection));
    return { ok: true, connection };
  }

  /** The workspace's connections a caller may see: everyone's for admins and auditors, else the workspace's and their own. */
  list(
    caller: Principal,
    scope: WorkspaceScope,
    server: string | undefined,
    page: Keyset<{ createdAt: Date; id: string }>,
  ) {
    const all = allows(scope.role, 'connection.read_all');
    const subjects = [WORKSPACE_SUBJECT, ...(caller.kind === 'user' ? [`user:${caller.id}`] : [])];
    return this.repository.list(scope, { ...(all ? {} : { subjects }), ...(server ? { server } : {}) }, page);
  }

  /**
   * Ends a connection: revoked at the upstream where it has a revocation
   * endpoint, then deleted with its sealed tokens and its audit record. A
   * person ends their own; admins any. Another person's is a 404 to anyone
   * else, as if it did not exist.
   */
  async remove(
    caller: Principal,
    scope: WorkspaceScope,
    id: string,
  ): Promise<ConnectionRecord & { upstreamRevoked: boolean }> {
    const manage = allows(scope.role, 'connection.manage');
    const own = caller.kind === 'user' ? `user:${caller.id}` : null;
    const found = await this.repository.find(scope, id);
    if (!found || (!manage && found.subject !== own)) throw new NotFoundError('connection', id, 'CONNECTION_NOT_FOUND');
    const upstreamRevoked = await this.revokeUpstream(scope, found);
    const deleted = await this.db.transaction(async (tx) => {
      const row = await this.repository.delete(scope, id, manage ? {} : { subject: own! }, tx);
      if (!row) throw new NotFoundError('connection', id, 'CONNECTION_NOT_FOUND');
      await this.vault.forget(scope, { in: [connectionKey(id)] }, tx);
      await this.record(tx, scope, 'connection.revoked', row, describePrincipal(caller), {
        reason: row.subject === own ? 'revoked_by_person' : 'revoked_by_admin',
        upstream_revoked: upstreamRevoked,
      });
      return row;
    });
    await this.events.changed(changeOf(deleted));
    return { ...deleted, upstreamRevoked };
  }

  /** An audit record (and event) of a connection: who it is for, never a token. */
  async record(
    tx: Transaction,
    scope: WorkspaceScope,
    topic: string,
    connection: ConnectionRecord,
    actor: string,
    data: Record<string, unknown>,
  ): Promise<void> {
    await this.outbox.record(tx, {
      topic,
      organizationId: scope.organizationId,
      workspaceId: scope.workspaceId,
      payload: {
        workspace: scope.workspaceSlug,
        connection_id: connection.id,
        server: connection.server,
        connections: connection.subject === WORKSPACE_SUBJECT ? 'per_workspace' : 'per_person',
        user_id: connection.userId,
        ...data,
        actor,
      },
    });
  }

  /** The secret the pool authenticates with at the token endpoint, if its client has one. */
  async clientSecret(scope: WorkspaceScope, upstream: UpstreamAuthorization): Promise<string | null> {
    const secret = upstream.client.secret;
    if (!secret) return null;
    if ('kept' in secret) {
      const kept = await this.vault.kept(scope, secret.kept);
      return kept === null ? null : ((JSON.parse(kept) as { client_secret?: string }).client_secret ?? null);
    }
    return this.vault.resolve(scope, secret.ref, {
      actor: 'pool:connections',
      server: upstream.authorizationServer,
      instance: 'oauth-client',
    });
  }

  /** The sealed tokens of a connection, for the pool and for revocation. */
  async tokens(scope: WorkspaceScope, id: string): Promise<StoredTokens | null> {
    const kept = await this.vault.kept(scope, connectionKey(id));
    return kept === null ? null : (JSON.parse(kept) as StoredTokens);
  }

  get upstreamOAuth(): UpstreamOauth {
    return this.oauth;
  }

  private async revokeUpstream(scope: WorkspaceScope, connection: ConnectionRecord): Promise<boolean> {
    try {
      const tokens = await this.tokens(scope, connection.id);
      if (!tokens) return false;
      return await this.oauth.revoke(connection.upstream, await this.clientSecret(scope, connection.upstream), tokens);
    } catch (error) {
      this.logger.warn({ connection: connection.id, reason: (error as Error).message }, 'revocation upstream failed');
      return false;
    }
  }

  private async offboard(scope: OrgScope, person: Offboardee, context: OffboardingContext) {
    const ended = await this.repository.deleteOfUser(scope, person.userId, context.tx);
    const revocations: { scope: WorkspaceScope; connection: ConnectionRecord; tokens: StoredTokens | null }[] = [];
    for (const connection of ended) {
      const workspace = SystemScopes.workspace(connection.organizationId, {
        id: connection.workspaceId,
        slug: connection.workspaceSlug,
      });
      revocations.push({
        scope: workspace,
        connection,
        tokens: await this.tokensIn(workspace, connection.id, context.tx),
      });
      await this.vault.forget(workspace, { in: [connectionKey(connection.id)] }, context.tx);
      await this.record(context.tx, workspace, 'connection.revoked', connection, context.actor, {
        reason: context.reason,
        upstream_revoked: false,
      });
    }
    // the upstream hears after the commit, with what was read in it; best effort
    this.db.afterCommit(context.tx, () => {
      for (const { scope: workspace, connection, tokens } of revocations) {
        void (async () => {
          if (tokens)
            await this.oauth.revoke(
              connection.upstream,
              await this.clientSecret(workspace, connection.upstream),
              tokens,
            );
          await this.events.changed(changeOf(connection));
        })().catch(() => undefined);
      }
    });
    return { upstream_connections: ended.length };
  }

  private async tokensIn(scope: WorkspaceScope, id: string, tx: Transaction): Promise<StoredTokens | null> {
    const kept = await this.vault.kept(scope, connectionKey(id), tx);
    return kept === null ? null : (JSON.parse(kept) as StoredTokens);
  }

  /** The server as the workspace's pinned catalog version has it, if it signs in with OAuth. */
  async oauthServer(scope: WorkspaceScope, server: string): Promise<OauthServer> {
    const assignment = (await this.catalog.workspaceServers(scope)).find((a) => a.name === server);
    if (!assignment) throw new NotFoundError('server', server, 'MCP_SERVER_NOT_FOUND');
    const definition = assignment.pinned.definition as Record<string, unknown>;
    const settings = oauthOf(definition);
    if (!settings || typeof definition.url !== 'string')
      throw new ConflictError(
        'CONNECTION_NOT_OAUTH',
        `"${server}" does not sign in with OAuth (its catalog entry has no auth: oauth): there is nothing to connect`,
      );
    return {
      server,
      url: definition.url,
      mode: settings.connections,
      clientId: settings.client_id,
      clientSecretRef: settings.client_secret,
      scopes: settings.scopes,
    };
  }

  private mayConnect(scope: WorkspaceScope, target: OauthServer): void {
    if (target.mode === 'per_workspace' && !allows(scope.role, 'connection.manage'))
      throw new ForbiddenError(
        `"${target.server}" connects once for the whole workspace: an owner or admin of workspace "${scope.workspaceSlug}" connects it`,
      );
  }

  private discovered = new Map<
    string,
    { at: number; value: Promise<Awaited<ReturnType<UpstreamOauth['discover']>>> }
  >();

  /** The upstream's discovery, kept a minute per replica: a connect URL opened right after POST does not discover twice. */
  private discovery(target: OauthServer) {
    const key = `${target.url}\n${target.scopes?.join(' ') ?? ''}`;
    const now = this.clock.now();
    const hit = this.discovered.get(key);
    if (hit && now - hit.at < 60_000) return hit.value;
    const value = this.oauth.discover(target.url, target.scopes);
    value.catch(() => this.discovered.delete(key));
    this.discovered.set(key, { at: now, value });
    for (const [k, v] of this.discovered) if (now - v.at >= 60_000) this.discovered.delete(k);
    return value;
  }

  /**
   * How the pool signs in to this upstream, registering where it must, in the
   * MCP authorization specification's order: the client an admin registered
   * by hand (the entry names it), else the pool's Client ID Metadata Document
   * where the authorization server takes them, else a dynamic registration
   * (kept in the vault, reused by every connection to that server), else
   * nothing can be done and the admin is told to register one.
   */
  private async authorization(scope: WorkspaceScope, target: OauthServer): Promise<UpstreamAuthorization> {
    const discovery = await this.discovery(target).catch((error: unknown) => {
      throw this.unavailable(target, error);
    });
    const redirectUri = `${this.config.publicUrl}${CALLBACK_PATH}`;
    const base = {
      authorizationServer: discovery.authorizationServer,
      metadata: discovery.metadata,
      resource: discovery.resource,
      redirectUri,
    };
    if (target.clientId)
      return {
        ...base,
        client: {
          client_id: target.clientId,
          registration: 'preregistered',
          secret: target.clientSecretRef ? { ref: target.clientSecretRef } : null,
        },
      };
    if (discovery.metadata?.client_id_metadata_document_supported === true && this.offersClientMetadataDocument())
      return {
        ...base,
        client: { client_id: this.clientMetadataUrl(), registration: 'metadata_document', secret: null },
      };
    const key = registrationKey(target.server, discovery.authorizationServer, redirectUri);
    let registered = await this.vault
      .kept(scope, key)
      .then((kept) => (kept ? (JSON.parse(kept) as OAuthClientInformationFull) : null));
    if (!registered) {
      const supported = discovery.metadata?.token_endpoint_auth_methods_supported ?? [];
      const method = supported.includes('client_secret_basic')
        ? 'client_secret_basic'
        : supported.includes('client_secret_post')
          ? 'client_secret_post'
          : 'none';
      registered = await this.oauth.register(discovery, this.clientMetadata(method)).catch((error: unknown) => {
        throw this.unavailable(target, error);
      });
      if (!registered)
        throw new ConflictError(
          'UPSTREAM_OAUTH_REGISTRATION_UNAVAILABLE',
          `${new URL(discovery.authorizationServer).host} takes neither Client ID Metadata Documents nor dynamic registration: register a client there by hand (redirect URI ${redirectUri}) and put its client_id, and its secret as a vault reference, in "${target.server}"'s catalog entry (oauth.client_id, oauth.client_secret)`,
        );
      await this.db.transaction((tx) => this.vault.keep(scope, key, JSON.stringify(registered), tx));
    }
    return {
      ...base,
      client: {
        client_id: registered.client_id,
        registration: 'dynamic',
        token_endpoint_auth_method: registered.token_endpoint_auth_method,
        secret: registered.client_secret ? { kept: key } : null,
      },
    };
  }

  private unavailable(target: OauthServer, error: unknown): DomainError {
    if (error instanceof DomainError) return error;
    if (error instanceof UpstreamOauthError)
      return new DomainError('UPSTREAM_OAUTH_UNAVAILABLE', `"${target.server}" cannot be connected: ${error.reason}`);
    return error as DomainError;
  }

  private clientMetadataUrl(): string {
    return `${this.config.publicUrl}${CLIENT_METADATA_PATH}`;
  }

  /** An https document, or an http one on loopback where the installation says so (tests, one machine). */
  private offersClientMetadataDocument(): boolean {
    const url = new URL(this.clientMetadataUrl());
    if (url.protocol === 'https:') return true;
    return this.config.oauth.httpClientIds && /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])$/.test(url.hostname);
  }

  private clientMetadata(method: string): PoolClientMetadata {
    return {
      client_name: 'Aileron',
      // OpenID Connect Registration's kind of client (SEP-837): the pool's redirect URI is a web server's, not a native app's
      application_type: 'web',
      client_uri: this.config.publicUrl,
      redirect_uris: [`${this.config.publicUrl}${CALLBACK_PATH}`],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: method,
    };
  }
}

/** What the vault keeps of a connection: the tokens, nothing else. */
export interface StoredTokens {
  access_token: string;
  refresh_token?: string;
  token_type?: string;
  /** seconds, as the server gave it */
  expires_in?: number;
}

export function sealTokens(tokens: OAuthTokens): string {
  return JSON.stringify({
    access_token: tokens.access_token,
    ...(tokens.refresh_token ? { refresh_token: tokens.refresh_token } : {}),
    token_type: tokens.token_type,
    ...(tokens.expires_in !== undefined ? { expires_in: tokens.expires_in } : {}),
  } satisfies StoredTokens);
}

export function tokenFacts(tokens: OAuthTokens, asked: string | null, now: Date) {
  return {
    scope: tokens.scope ?? asked,
    accessExpiresAt: tokens.expires_in !== undefined ? new Date(now.getTime() + tokens.expires_in * 1000) : null,
    hasRefreshToken: Boolean(tokens.refresh_token),
  };
}

export function changeOf(connection: ConnectionRecord): ConnectionChange {
  return {
    id: connection.id,
    workspaceId: connection.workspaceId,
    server: connection.server,
    subject: connection.subject,
  };
}

export function connectionKey(id: string): string {
  return `connection:${id}`;
}

function startKey(id: string): string {
  return `connection-start:${id}`;
}

function unionOfScopes(...scopes: (string | undefined)[]): string | undefined {
  const all = [...new Set(scopes.flatMap((scope) => (scope ?? '').split(' ').filter(Boolean)))];
  return all.length > 0 ? all.join(' ') : undefined;
}

function sha256(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

function sameHash(a: string, b: string): boolean {
  return a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
}
