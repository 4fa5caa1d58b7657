import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { SETTINGS, SettingName, SettingValue, SettingValues } from './config.schema';

/** the uids in the sandboxes' and in the pool's range each (HOST_UID_COUNT of @aileron/bubblewrap, which configuration does not depend on) */
const UIDS_PER_RANGE = 65_536;

export type Mode = 'embedded' | 'server';

/** The parsed, validated configuration. Built once at boot and passed around. */
export interface AppConfig {
  mode: Mode;
  port: number;
  host: string;
  dataDir: string;
  database: { kind: 'pglite'; dataDir: string } | { kind: 'postgres'; url: string; poolSize: number };
  redisUrl: string | undefined;
  queuePrefix: string;
  runWorkers: boolean;
  publicUrl: string;
  /** set when configured; otherwise the pool derives it from the listening port */
  replicaUrl: string | undefined;
  logLevel: SettingValue<'LOG_LEVEL'>;
  upstreamAllowCidrs: string[];
  jwtTtlSeconds: number;
  /** Aileron as the authorization server of its MCP endpoints (docs/oauth.md) */
  oauth: { accessTokenTtlSeconds: number; refreshTokenTtlSeconds: number; httpClientIds: boolean };
  outboxPollMs: number;
  shutdownGraceSeconds: number;
  /** inline root key(s); secret */
  rootKey: string | undefined;
  rootKeyFile: string | undefined;
  vaultKeepVersions: number;
  auditCheckpointEvery: number;
  auditCheckpointSeconds: number;
  webhookPauseAfterSeconds: number;
  pool: {
    driver: SettingValue<'AILERON_POOL_DRIVER'>;
    sandbox: SettingValue<'AILERON_POOL_SANDBOX'>;
    /** a root control plane's first uid for local instances */
    uidBase: number;
    idleSeconds: number;
    sessionIdleSeconds: number;
    maxInstancesPerWorkspace: number;
    maxConcurrentCalls: number;
    approvalWaitSeconds: number;
    /** how long a call waits for its person to connect an OAuth upstream after a URL elicitation */
    connectWaitSeconds: number;
    auditBatchMs: number;
    /** the pause in calls a due audit batch waits for (0: none) */
    auditQuietMs: number;
    memoryMb: number;
    cpuMillis: number;
    runnerImage: string;
    /** private ranges Kubernetes pool pods may reach besides the public internet */
    egressAllowCidrs: string[];
    /** public ranges they must not reach besides the private ones (a cluster's global IPv6 ranges) */
    egressExceptCidrs: string[];
    kubernetesNamespace: string;
    /** the control plane's own Pod (downward API), which labels and owns the pods the Kubernetes driver makes */
    controlPlanePod: { name: string; uid: string | undefined } | undefined;
    /** the control plane's own namespace (downward API): the Kubernetes drivers' NetworkPolicies admit its pods from there */
    controlPlaneNamespace: string | undefined;
  };
  rateLimits: { workspacePerMinute: number; principalPerMinute: number; withoutRedis: 'open' | 'closed' };
  sandboxes: {
    driver: SettingValue<'AILERON_SANDBOX_DRIVER'>;
    image: string | undefined;
    versionMismatch: SettingValue<'AILERON_SANDBOX_VERSION_MISMATCH'>;
    /** Kubernetes: where the sandboxes' objects live (the pool's namespace unless set) */
    kubernetesNamespace: string;
    /** Kubernetes: the claims' sizes and storage class (undefined: the cluster's default) */
    storage: { files: string; history: string; storageClassName: string | undefined };
    snapshots: boolean;
    snapshotMaxFiles: number;
    snapshotMaxBytes: number;
    snapshotTimeoutSeconds: number;
    idleSeconds: number;
    bashTimeoutMs: number;
    bashMaxTimeoutMs: number;
    sourceMaxBytes: number;
    maxPerWorkspace: number;
    /** what a sandbox gets of each limit its create request does not name */
    defaultLimits: { pids: number; memoryMb: number; cpuSeconds: number };
    /** local: the CPUs' worth of time a sandbox may take at once (undefined: no bound) */
    cpus: number | undefined;
    /** local: /tmp's and the home's size, each, in MiB */
    tmpfsMb: number;
    /** local, root control plane: the first of the sandboxes' host uids */
    uidBase: number;
    /** who may make a sandbox with network egress */
    egress: SettingValue<'AILERON_SANDBOX_EGRESS'>;
  };
}

export class ConfigError extends Error {
  constructor(readonly problems: { name: string; message: string }[]) {
    super(`invalid configuration: ${problems.map((p) => `${p.name} ${p.message}`).join('; ')}`);
    this.name = 'ConfigError';
  }
}

type Source = Record<string, string | undefined>;

function readConfigFile(path: string): Source {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError([
      {
        name: 'AILERON_CONFIG_FILE',
        message: `cannot be read: ${(error as NodeJS.ErrnoException).code ?? 'error'} (${path})`,
      },
    ]);
  }
  let parsed: unknown;
  try {
    parsed = /\.ya?ml$/i.test(path) ? parseYaml(text) : JSON.parse(text);
  } catch (error) {
    throw new ConfigError([
      {
        name: 'AILERON_CONFIG_FILE',
        message: `is not valid ${/\.ya?ml$/i.test(path) ? 'YAML' : 'JSON'}: ${(error as Error).message.split('\n')[0]}`,
      },
    ]);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ConfigError([{ name: 'AILERON_CONFIG_FILE', message: 'must hold an object of SETTING: value' }]);
  }
  const out: Source = {};
  for (const [key, value] of Object.entries(parsed)) {
    if (!(key in SETTINGS))
      throw new ConfigError([{ name: 'AILERON_CONFIG_FILE', message: `names an unknown setting "${key}"` }]);
    out[key] = Array.isArray(value) ? value.join(',') : String(value);
  }
  return out;
}

function describeValue(name: string, raw: string): string {
  // URLs may carry passwords: never echo them back.
  return /(URL|KEY)$/.test(name) ? '' : ` (got ${JSON.stringify(raw.length > 60 ? raw.slice(0, 60) + '…' : raw)})`;
}

/** Parses and validates the configuration; throws ConfigError naming every bad variable. */
export function loadConfig(env: Source = process.env): AppConfig {
  const file = env.AILERON_CONFIG_FILE ? readConfigFile(env.AILERON_CONFIG_FILE) : {};
  const values: Partial<Record<SettingName, unknown>> = {};
  const problems: { name: string; message: string }[] = [];
  for (const name of Object.keys(SETTINGS) as SettingName[]) {
    const setting: { schema: z.ZodType; default?: string } = SETTINGS[name];
    const fromEnv = env[name];
    const raw = fromEnv !== undefined && fromEnv !== '' ? fromEnv : (file[name] ?? setting.default);
    if (raw === undefined) continue;
    const result = setting.schema.safeParse(raw);
    if (result.success) values[name] = result.data;
    else
      problems.push({ name, message: `${result.error.issues[0]?.message ?? 'is invalid'}${describeValue(name, raw)}` });
  }
  // a UID alone would own pods under a name nobody knows, and the replica label needs the name
  if (values.AILERON_POD_UID !== undefined && values.AILERON_POD_NAME === undefined) {
    problems.push({ name: 'AILERON_POD_UID', message: 'needs AILERON_POD_NAME as well' });
  }
  // the sandbox driver reads back the Secrets of its namespace (its runners' tokens): there it would read the pool instances' credentials
  const sandboxNamespace = values.AILERON_SANDBOX_K8S_NAMESPACE || values.AILERON_K8S_NAMESPACE;
  if (
    values.AILERON_SANDBOX_DRIVER === 'kubernetes' &&
    values.AILERON_POOL_DRIVER === 'kubernetes' &&
    sandboxNamespace === values.AILERON_K8S_NAMESPACE
  ) {
    problems.push({
      name: 'AILERON_SANDBOX_K8S_NAMESPACE',
      message: `must name a namespace other than the pool's (AILERON_K8S_NAMESPACE, ${String(values.AILERON_K8S_NAMESPACE)}) when both run on Kubernetes: the sandboxes' access to their runners' Secrets would reach the pool instances' credentials`,
    });
  }
  // a uid both ranges hold would be a pool instance's and a sandbox's at once: removing the sandbox ends every process of its uid
  const sandboxUids = values.AILERON_SANDBOX_UID_BASE;
  const poolUids = values.AILERON_POOL_UID_BASE;
  if (
    typeof sandboxUids === 'number' &&
    typeof poolUids === 'number' &&
    Math.abs(sandboxUids - poolUids) < UIDS_PER_RANGE
  ) {
    problems.push({
      name: 'AILERON_POOL_UID_BASE',
      message: `must be ${UIDS_PER_RANGE} or more away from AILERON_SANDBOX_UID_BASE (${sandboxUids}): the pool's and the sandboxes' uids must not overlap`,
    });
  }
  if (problems.length > 0) throw new ConfigError(problems);

  // every setting has parsed (or a problem was thrown), and those with a default were read
  return toAppConfig(values as SettingValues);
}

function toAppConfig(values: SettingValues): AppConfig {
  const port = values.PORT;
  const databaseUrl = values.DATABASE_URL;
  const redisUrl = values.REDIS_URL;
  const mode: Mode = databaseUrl ? 'server' : 'embedded';
  const dataDir = resolve(values.AILERON_DATA_DIR);
  return {
    mode,
    port,
    host: values.HOST ?? (mode === 'embedded' ? '127.0.0.1' : '0.0.0.0'),
    dataDir,
    database: databaseUrl
      ? { kind: 'postgres', url: databaseUrl, poolSize: values.DATABASE_POOL_SIZE }
      : { kind: 'pglite', dataDir: resolve(dataDir, 'pgdata') },
    redisUrl,
    queuePrefix: values.AILERON_QUEUE_PREFIX,
    runWorkers: values.AILERON_RUN_WORKERS ?? !redisUrl,
    replicaUrl: values.AILERON_REPLICA_URL?.replace(/\/+$/, ''),
    publicUrl: (values.AILERON_PUBLIC_URL ?? `http://localhost:${port}`).replace(/\/+$/, ''),
    logLevel: values.LOG_LEVEL,
    upstreamAllowCidrs: values.UPSTREAM_ALLOW_CIDRS,
    jwtTtlSeconds: values.AILERON_JWT_TTL_SECONDS,
    oauth: {
      accessTokenTtlSeconds: values.AILERON_OAUTH_ACCESS_TOKEN_TTL_SECONDS,
      refreshTokenTtlSeconds: values.AILERON_OAUTH_REFRESH_TOKEN_TTL_SECONDS,
      httpClientIds: values.AILERON_OAUTH_HTTP_CLIENT_IDS,
    },
    outboxPollMs: values.AILERON_OUTBOX_POLL_MS,
    shutdownGraceSeconds: values.AILERON_SHUTDOWN_GRACE_SECONDS,
    rootKey: values.AILERON_ROOT_KEY,
    rootKeyFile: values.AILERON_ROOT_KEY_FILE ? resolve(values.AILERON_ROOT_KEY_FILE) : undefined,
    vaultKeepVersions: values.AILERON_VAULT_KEEP_VERSIONS,
    auditCheckpointEvery: values.AILERON_AUDIT_CHECKPOINT_EVERY,
    auditCheckpointSeconds: values.AILERON_AUDIT_CHECKPOINT_SECONDS,
    webhookPauseAfterSeconds: values.AILERON_WEBHOOK_PAUSE_AFTER_SECONDS,
    pool: {
      driver: values.AILERON_POOL_DRIVER,
      sandbox: values.AILERON_POOL_SANDBOX,
      uidBase: values.AILERON_POOL_UID_BASE,
      idleSeconds: values.AILERON_POOL_IDLE_SECONDS,
      sessionIdleSeconds: values.AILERON_POOL_SESSION_IDLE_SECONDS,
      maxInstancesPerWorkspace: values.AILERON_POOL_MAX_INSTANCES_PER_WORKSPACE,
      maxConcurrentCalls: values.AILERON_POOL_MAX_CONCURRENT_CALLS,
      approvalWaitSeconds: values.AILERON_POOL_APPROVAL_WAIT_SECONDS,
      connectWaitSeconds: values.AILERON_POOL_CONNECT_WAIT_SECONDS,
      auditBatchMs: values.AILERON_POOL_AUDIT_BATCH_MS,
      auditQuietMs: values.AILERON_POOL_AUDIT_QUIET_MS,
      memoryMb: values.AILERON_POOL_MEMORY_MB,
      cpuMillis: values.AILERON_POOL_CPU_MILLIS,
      runnerImage: values.AILERON_POOL_RUNNER_IMAGE,
      egressAllowCidrs: values.AILERON_POOL_EGRESS_ALLOW_CIDRS,
      egressExceptCidrs: values.AILERON_POOL_EGRESS_EXCEPT_CIDRS,
      kubernetesNamespace: values.AILERON_K8S_NAMESPACE,
      controlPlanePod: values.AILERON_POD_NAME
        ? { name: values.AILERON_POD_NAME, uid: values.AILERON_POD_UID }
        : undefined,
      controlPlaneNamespace: values.AILERON_POD_NAMESPACE,
    },
    rateLimits: {
      workspacePerMinute: values.AILERON_RATE_LIMIT_WORKSPACE_PER_MINUTE,
      principalPerMinute: values.AILERON_RATE_LIMIT_PRINCIPAL_PER_MINUTE,
      withoutRedis: values.AILERON_RATE_LIMIT_WITHOUT_REDIS,
    },
    sandboxes: {
      driver: values.AILERON_SANDBOX_DRIVER,
      image: values.AILERON_SANDBOX_IMAGE || undefined,
      versionMismatch: values.AILERON_SANDBOX_VERSION_MISMATCH,
      kubernetesNamespace: values.AILERON_SANDBOX_K8S_NAMESPACE || values.AILERON_K8S_NAMESPACE,
      storage: {
        files: values.AILERON_SANDBOX_FILES_SIZE,
        history: values.AILERON_SANDBOX_HISTORY_SIZE,
        storageClassName: values.AILERON_SANDBOX_STORAGE_CLASS || undefined,
      },
      snapshots: values.AILERON_SANDBOX_SNAPSHOTS === 'on',
      snapshotMaxFiles: values.AILERON_SANDBOX_SNAPSHOT_MAX_FILES,
      snapshotMaxBytes: values.AILERON_SANDBOX_SNAPSHOT_MAX_BYTES,
      snapshotTimeoutSeconds: values.AILERON_SANDBOX_SNAPSHOT_TIMEOUT_SECONDS,
      idleSeconds: values.AILERON_SANDBOX_IDLE_SECONDS,
      bashTimeoutMs: values.AILERON_SANDBOX_BASH_TIMEOUT_MS,
      bashMaxTimeoutMs: values.AILERON_SANDBOX_BASH_MAX_TIMEOUT_MS,
      sourceMaxBytes: values.AILERON_SANDBOX_SOURCE_MAX_BYTES,
      maxPerWorkspace: values.AILERON_SANDBOX_MAX_PER_WORKSPACE,
      defaultLimits: {
        pids: values.AILERON_SANDBOX_DEFAULT_PIDS,
        memoryMb: values.AILERON_SANDBOX_DEFAULT_MEMORY_MB,
        cpuSeconds: values.AILERON_SANDBOX_DEFAULT_CPU_SECONDS,
      },
      cpus: values.AILERON_SANDBOX_CPUS,
      tmpfsMb: values.AILERON_SANDBOX_TMPFS_MB,
      uidBase: values.AILERON_SANDBOX_UID_BASE,
      egress: values.AILERON_SANDBOX_EGRESS,
    },
  };
}

/**
 * For entry points: parse or stop the process with one line naming the
 * variable. Nothing else has started yet, so exiting here loses nothing.
 */
export function loadConfigOrExit(env: Source = process.env): AppConfig {
  try {
    return loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`aileron: ${error.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw error;
  }
}
