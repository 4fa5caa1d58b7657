import { OVERRIDABLE_FIELDS, SERVER_NAME } from './catalog-entry';

/**
 * The two layers of a gateway's configuration: the organisation's baseline
 * (from the catalog) and a developer's local file. Gateways implement the same
 * function; docs/catalog.md states every rule with an example, and a change
 * here is a change there.
 */
export type OverridableField = (typeof OVERRIDABLE_FIELDS)[number];

export interface BaselineServer {
  name: string;
  mode: 'local' | 'remote';
  command?: string;
  args?: string[];
  url?: string;
  image?: string;
  env?: Record<string, string>;
  cwd?: string;
  /** the entry's `tool_prefix` (null or absent: none), which a server switched to local keeps */
  tool_prefix?: string | null;
  overridable: OverridableField[];
  /**
   * false when the organisation switched the server off (kill switch). It stays
   * in the list so its name cannot be taken by a local server, and nothing
   * local turns it back on.
   */
  enabled?: boolean;
}

export interface MergePolicy {
  allow_local_servers: boolean;
}

export interface LocalServer {
  name: string;
  /**
   * `local` on a remote baseline server switches it to local (the developer's
   * machine runs it under the same name); a developer's file cannot make anything remote
   */
  mode?: 'local' | 'remote';
  command?: string;
  args?: string[];
  url?: string;
  env?: Record<string, string>;
  cwd?: string;
  enabled?: boolean;
}

export interface MergedServer {
  name: string;
  source: 'baseline' | 'local';
  mode: 'local' | 'remote';
  enabled: boolean;
  command?: string;
  args?: string[];
  url?: string;
  image?: string;
  env?: Record<string, string>;
  cwd?: string;
  tool_prefix?: string;
  /** fields a local entry supplied and that were applied, sorted; `["mode"]` for a remote server switched to local */
  overridden: string[];
}

/**
 * Why the merge set a local entry (or one field of it) aside. These are the
 * merge's own answers, in its `rejected` list, never problem documents: the
 * gateway merges, and no API error carries them (docs/catalog.md lists them,
 * a spec keeps that list whole).
 */
export const REJECTION_REASONS = [
  'DUPLICATE_LOCAL_SERVER',
  'FIELD_NOT_OVERRIDABLE',
  'LOCAL_SERVERS_NOT_ALLOWED',
  'INVALID_NAME',
  'NAME_RESERVED',
  'MODE_NOT_LOCAL',
  'COMMAND_OR_URL_REQUIRED',
] as const;

export type RejectionReason = (typeof REJECTION_REASONS)[number];

export interface Rejection {
  server: string;
  field?: string;
  reason: RejectionReason;
}

export interface MergeResult {
  servers: MergedServer[];
  rejected: Rejection[];
}

/** Fields of a local entry, in the order they are checked against a baseline server. */
const LOCAL_FIELDS = ['mode', 'command', 'args', 'url', 'env', 'cwd', 'enabled'] as const;

/** Kept for the organisation's own servers, so a local file cannot pose as one. */
export function isReservedServerName(name: string): boolean {
  return name.startsWith('aileron');
}

/**
 * Merges a developer's local servers into the baseline. Baseline servers are
 * always present; one switched off by the organisation accepts no override.
 * Each local entry is judged in this order:
 * 1. a name already used by an earlier local entry: DUPLICATE_LOCAL_SERVER;
 * 2. a baseline server's name: with `mode: local` on a remote server that is
 *    on, a switch to local (switchToLocal); otherwise an override, field by field;
 * 3. local servers not allowed: LOCAL_SERVERS_NOT_ALLOWED;
 * 4. a name outside the catalog name rule: INVALID_NAME;
 * 5. a name starting with `aileron`: NAME_RESERVED;
 * 6. `mode: remote`: MODE_NOT_LOCAL;
 * 7. otherwise added as a local server.
 */
export function mergeConfig(
  baseline: readonly BaselineServer[],
  merge: MergePolicy,
  local: readonly LocalServer[],
): MergeResult {
  const servers = new Map<string, MergedServer>();
  const overridable = new Map<string, ReadonlySet<string>>();
  for (const server of baseline) {
    if (servers.has(server.name)) throw new Error(`baseline names ${server.name} twice`);
    servers.set(server.name, fromBaseline(server));
    // the pool runs remote servers: a developer may switch one off for themselves, nothing more
    const fields =
      server.enabled === false
        ? []
        : server.mode === 'remote'
          ? server.overridable.filter((field) => field === 'enabled')
          : server.overridable;
    overridable.set(server.name, new Set(fields));
  }

  const rejected: Rejection[] = [];
  const seen = new Set<string>();
  for (const entry of local) {
    if (seen.has(entry.name)) {
      rejected.push({ server: entry.name, reason: 'DUPLICATE_LOCAL_SERVER' });
      continue;
    }
    seen.add(entry.name);
    const allowed = overridable.get(entry.name);
    if (allowed) {
      const server = servers.get(entry.name)!;
      // a server switched off by the organisation stays as it is: its fields are refused one by one below
      if (entry.mode === 'local' && server.mode === 'remote' && server.enabled) {
        const refused = switchRefusal(entry, merge);
        if (refused) rejected.push({ server: entry.name, field: refused.field, reason: refused.reason });
        else servers.set(entry.name, switchToLocal(server, entry));
        continue;
      }
      for (const field of LOCAL_FIELDS) {
        if (entry[field] === undefined) continue;
        // saying what the server already is changes nothing
        if (field === 'mode' && entry.mode === server.mode) continue;
        if (field === 'mode' && entry.mode === 'remote')
          rejected.push({ server: entry.name, field, reason: 'MODE_NOT_LOCAL' });
        else if (!isOverridableField(field) || !allowed.has(field))
          rejected.push({ server: entry.name, field, reason: 'FIELD_NOT_OVERRIDABLE' });
        else applyOverride(server, entry, field);
      }
      server.overridden.sort(byText);
    } else if (!merge.allow_local_servers) {
      rejected.push({ server: entry.name, reason: 'LOCAL_SERVERS_NOT_ALLOWED' });
    } else if (!SERVER_NAME.test(entry.name)) {
      rejected.push({ server: entry.name, reason: 'INVALID_NAME' });
    } else if (isReservedServerName(entry.name)) {
      rejected.push({ server: entry.name, reason: 'NAME_RESERVED' });
    } else if (entry.mode === 'remote') {
      rejected.push({ server: entry.name, field: 'mode', reason: 'MODE_NOT_LOCAL' });
    } else {
      servers.set(entry.name, fromLocal(entry));
    }
  }

  return {
    servers: [...servers.values()].sort((a, b) => byText(a.name, b.name)),
    rejected: rejected.sort((a, b) => byText(a.server, b.server) || byText(a.field ?? '', b.field ?? '')),
  };
}

/**
 * Why a switch of a remote server to local is refused, if it is: the
 * organisation allows no local servers, or the entry does not say how to
 * reach the server (exactly one of a command or a URL, as any local server).
 */
function switchRefusal(entry: LocalServer, merge: MergePolicy): { field: string; reason: RejectionReason } | undefined {
  if (!merge.allow_local_servers) return { field: 'mode', reason: 'LOCAL_SERVERS_NOT_ALLOWED' };
  if ((entry.command === undefined) === (entry.url === undefined))
    return { field: entry.command === undefined ? 'command' : 'url', reason: 'COMMAND_OR_URL_REQUIRED' };
  return undefined;
}

/**
 * The developer's machine runs a remote baseline server instead of the pool,
 * under the same name (the policy, approvals and audit name it alike) and tool
 * prefix (the agent's tool names stay). Nothing of the remote definition
 * comes along: its pool URL is no use locally and its credentials stay central.
 */
function switchToLocal(remote: MergedServer, entry: LocalServer): MergedServer {
  return withoutUndefined({
    ...fromLocal(entry),
    tool_prefix: remote.tool_prefix,
    overridden: ['mode'],
  });
}

function isOverridableField(field: string): field is OverridableField {
  return (OVERRIDABLE_FIELDS as readonly string[]).includes(field);
}

function applyOverride(server: MergedServer, entry: LocalServer, field: OverridableField): void {
  switch (field) {
    case 'args':
      server.args = [...entry.args!];
      break;
    case 'env':
      server.env = { ...server.env, ...entry.env };
      break;
    case 'cwd':
      server.cwd = entry.cwd!;
      break;
    case 'enabled':
      server.enabled = entry.enabled!;
      break;
  }
  server.overridden.push(field);
}

function fromBaseline(server: BaselineServer): MergedServer {
  return withoutUndefined({
    name: server.name,
    source: 'baseline',
    mode: server.mode,
    enabled: server.enabled !== false,
    command: server.command,
    args: server.args && [...server.args],
    url: server.url,
    image: server.image,
    env: server.env && { ...server.env },
    cwd: server.cwd,
    tool_prefix: server.tool_prefix ?? undefined,
    overridden: [],
  });
}

function fromLocal(entry: LocalServer): MergedServer {
  return withoutUndefined({
    name: entry.name,
    source: 'local',
    mode: 'local',
    enabled: entry.enabled ?? true,
    command: entry.command,
    args: entry.args && [...entry.args],
    url: entry.url,
    env: entry.env && { ...entry.env },
    cwd: entry.cwd,
    overridden: [],
  });
}

/** Absent fields stay absent, so merged output compares and serialises the same everywhere. */
function withoutUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** Code-unit order, not locale order: every gateway must sort the same way. */
function byText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
