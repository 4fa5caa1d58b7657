import { Inject, Injectable } from '@nestjs/common';
import type { Principal, WorkspaceScope } from '@aileron/auth';
import { Clock } from '@aileron/clock';
import {
  AssignmentRecord,
  CatalogEntryInput,
  CatalogService,
  CatalogVersionRecord,
  vaultReferences,
  versionFor,
} from '@aileron/catalog';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { CurrentPolicy, PolicyService } from '@aileron/policy';
import { strongEtag } from './domain/etag';
import {
  bundleSigningInput,
  offlineRule,
  PolicyBundlePayload,
  SecretNeed,
  SignedPolicyBundle,
} from './domain/policy-bundle';
import type { GatewaySettingsRecord } from './gateway.repository';
import { GatewaysService } from './gateways.service';
import { SigningKeysService } from '@aileron/keys';

export interface PreparedBody {
  body: string;
  etag: string;
}

type Settings = GatewaySettingsRecord & { organizationSlug: string };

interface PolicyMemo {
  policy: CurrentPolicy;
  settings: Settings;
  servers: AssignmentRecord[];
  kid: string;
  renewAt: number;
  prepared: PreparedBody;
}

interface CatalogMemo {
  servers: AssignmentRecord[];
  settings: Settings;
  groups: readonly string[];
  prepared: PreparedBody;
}

const MAX_MEMOS = 10_000;

/**
 * The version of an assigned server one gateway gets: the rollout's when the
 * rollout picks it (by id, name, group or percentage), else the pinned one.
 * The catalog it fetches and the secrets it may ask for follow the same choice.
 */
export function versionSeenBy(
  assignment: AssignmentRecord,
  gateway: Principal,
): { version: CatalogVersionRecord; fromRollout: boolean } {
  const rollout = assignment.rollout;
  if (!rollout) return { version: assignment.pinned, fromRollout: false };
  const identity = { id: gateway.id, name: gateway.name, groups: [...(gateway.gateway?.groups ?? [])] };
  const chosen = versionFor(
    assignment.pinned.version,
    { version: rollout.version.version, gateways: rollout.gateways, groups: rollout.groups, percent: rollout.percent },
    identity,
    assignment.name,
  );
  return chosen === rollout.version.version
    ? { version: rollout.version, fromRollout: true }
    : { version: assignment.pinned, fromRollout: false };
}

/** The `vault://` paths a local version's env names (none for a remote one: the pool resolves those). */
export function localSecretPaths(version: CatalogVersionRecord): string[] {
  return version.definition.mode === 'local'
    ? vaultReferences(version.definition as Pick<CatalogEntryInput, 'env' | 'headers' | 'oauth'>)
    : [];
}

/** Every version of the workspace's servers a gateway may be given that needs secrets, in a stable order. */
function secretNeeds(servers: AssignmentRecord[]): SecretNeed[] {
  const needs: SecretNeed[] = [];
  for (const assignment of servers) {
    const versions = [assignment.pinned, ...(assignment.rollout ? [assignment.rollout.version] : [])];
    for (const version of versions) {
      const paths = localSecretPaths(version);
      if (paths.length > 0) needs.push({ server: assignment.name, version: version.version, paths });
    }
  }
  return needs.sort((a, b) =>
    a.server !== b.server ? (a.server < b.server ? -1 : 1) : a.version < b.version ? -1 : a.version > b.version ? 1 : 0,
  );
}

/**
 * The gateway API's bodies, prepared once per change and served from memory.
 * Each memo remembers the cached inputs it was built from (the policy, the
 * workspace's servers, the settings): when any of them is invalidated, the
 * next request sees a different object and rebuilds. Bodies are deterministic,
 * so every replica serves the same bytes and the same ETag.
 */
@Injectable()
export class BundlesService {
  private readonly policyMemos = new Map<string, PolicyMemo>();
  private readonly catalogMemos = new Map<string, CatalogMemo>();

  constructor(
    private readonly policies: PolicyService,
    private readonly catalog: CatalogService,
    private readonly gateways: GatewaysService,
    private readonly keys: SigningKeysService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clock: Clock,
  ) {}

  /** The prepared bundle if every input is cached and unchanged; never waits. */
  peekPolicyBundle(scope: WorkspaceScope): PreparedBody | undefined {
    const policy = this.policies.peek(scope);
    const settings = this.gateways.peekSettings(scope);
    const servers = this.catalog.peekWorkspaceServers(scope);
    const ring = this.keys.peekRing('policy-bundle');
    if (!policy || !settings || !servers || !ring) return undefined;
    return this.policyMemo(scope, policy, settings, servers, ring.active.kid, this.clock.now());
  }

  private policyMemo(
    scope: WorkspaceScope,
    policy: CurrentPolicy,
    settings: Settings,
    servers: AssignmentRecord[],
    kid: string,
    now: number,
  ): PreparedBody | undefined {
    const memo = this.policyMemos.get(scope.workspaceId);
    return memo &&
      memo.policy === policy &&
      memo.settings === settings &&
      memo.servers === servers &&
      memo.kid === kid &&
      now < memo.renewAt
      ? memo.prepared
      : undefined;
  }

  async policyBundle(scope: WorkspaceScope): Promise<PreparedBody> {
    const [policy, settings, servers, ring] = await Promise.all([
      this.policies.current(scope),
      this.gateways.settings(scope),
      this.catalog.workspaceServers(scope),
      this.keys.ring('policy-bundle'),
    ]);
    const now = this.clock.now();
    const memoised = this.policyMemo(scope, policy, settings, servers, ring.active.kid, now);
    if (memoised) return memoised;

    // Issue times fall on a grid of half the staleness window, so every replica
    // signs the same bytes, and a bundle always has at least half its life left.
    const half = (settings.maxStaleSeconds * 1000) / 2;
    const slot = Math.floor(now / half) * half;
    const issuedAt = Math.max(slot, policy.createdAt?.getTime() ?? 0, settings.updatedAt?.getTime() ?? 0);
    const expiresAt = new Date(issuedAt + settings.maxStaleSeconds * 1000).toISOString();
    const payload: PolicyBundlePayload = {
      type: 'aileron.policy-bundle.v1',
      organization: settings.organizationSlug,
      workspace: scope.workspaceSlug,
      version: policy.version,
      digest: policy.digest,
      issued_at: new Date(issuedAt).toISOString(),
      expires_at: expiresAt,
      max_stale_seconds: settings.maxStaleSeconds,
      offline_mode: settings.offlineMode,
      offline: offlineRule(settings.offlineMode, expiresAt),
      needs_secrets: secretNeeds(servers),
      policy: {
        ...policy.document,
        default: policy.document.default ?? policy.workspaceDefault,
        on_error: policy.document.on_error ?? 'deny',
        rules: policy.document.rules,
      },
    };
    const signature = await this.keys.sign('policy-bundle', bundleSigningInput(payload));
    const bundle: SignedPolicyBundle = { payload, signature: { alg: 'EdDSA', ...signature } };
    const body = JSON.stringify(bundle);
    const prepared = { body, etag: strongEtag(body) };
    remember(this.policyMemos, scope.workspaceId, {
      policy,
      settings,
      servers,
      kid: signature.kid,
      renewAt: slot + half,
      prepared,
    });
    return prepared;
  }

  /** The catalog as this gateway sees it: rollouts make it differ between gateways. */
  /** The prepared catalog if every input is cached and unchanged; never waits. */
  peekCatalog(gateway: Principal, scope: WorkspaceScope): PreparedBody | undefined {
    const servers = this.catalog.peekWorkspaceServers(scope);
    const settings = this.gateways.peekSettings(scope);
    return servers && settings ? this.catalogMemo(gateway, servers, settings) : undefined;
  }

  private catalogMemo(gateway: Principal, servers: AssignmentRecord[], settings: Settings): PreparedBody | undefined {
    const memo = this.catalogMemos.get(gateway.id);
    return memo &&
      memo.servers === servers &&
      memo.settings === settings &&
      sameList(memo.groups, gateway.gateway?.groups ?? [])
      ? memo.prepared
      : undefined;
  }

  async catalogFor(gateway: Principal, scope: WorkspaceScope): Promise<PreparedBody> {
    const [servers, settings] = await Promise.all([
      this.catalog.workspaceServers(scope),
      this.gateways.settings(scope),
    ]);
    const groups = gateway.gateway?.groups ?? [];
    const memoised = this.catalogMemo(gateway, servers, settings);
    if (memoised) return memoised;

    const body = JSON.stringify({
      organization: settings.organizationSlug,
      workspace: scope.workspaceSlug,
      merge: { allow_local_servers: settings.allowLocalServers },
      mcp_url: `${this.config.publicUrl}/mcp/${scope.workspaceSlug}`,
      servers: servers.map((assignment) => {
        const { version, fromRollout } = versionSeenBy(assignment, gateway);
        return this.serverView(scope, assignment, version, fromRollout);
      }),
    });
    const prepared = { body, etag: strongEtag(body) };
    remember(this.catalogMemos, gateway.id, { servers, settings, groups, prepared });
    return prepared;
  }

  private serverView(
    scope: WorkspaceScope,
    assignment: AssignmentRecord,
    version: CatalogVersionRecord,
    fromRollout: boolean,
  ): Record<string, unknown> {
    const d = version.definition as Record<string, unknown> & { mode: 'local' | 'remote' };
    const common = {
      name: assignment.name,
      version: version.version,
      rollout: fromRollout,
      enabled: assignment.enabled,
      mode: d.mode,
      description: d.description ?? null,
      tool_prefix: d.tool_prefix ?? null,
      // a killed server cannot be switched back on by a local file
      overridable: assignment.enabled ? (d.overridable ?? []) : [],
    };
    if (!assignment.enabled) return { ...common, disabled_reason: assignment.disabledReason };
    if (d.mode === 'remote') {
      // the pool runs it; the gateway reaches it over Streamable HTTP and never sees its credentials
      return {
        ...common,
        transport: 'streamable_http',
        url: `${this.config.publicUrl}/mcp/${scope.workspaceSlug}/${assignment.name}`,
      };
    }
    const { mode: _mode, overridable: _overridable, description: _description, tool_prefix: _prefix, ...launch } = d;
    return { ...common, ...launch };
  }
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  if (map.size >= MAX_MEMOS) {
    const oldest = map.keys().next().value;
    if (oldest !== undefined) map.delete(oldest);
  }
  map.set(key, value);
}
