import { isIP } from 'node:net';
import { z } from 'zod';

/**
 * Every setting the process reads, with its default and meaning. The README's
 * configuration table is generated from `describeSettings()` so the two never drift.
 */
const port = z.coerce
  .number({ error: 'must be an integer' })
  .int('must be an integer')
  .min(1, 'must be 1..65535')
  .max(65535, 'must be 1..65535');
const positiveInt = z.coerce
  .number({ error: 'must be an integer' })
  .int('must be an integer')
  .positive('must be positive');
/** a wait or a pause where 0 means none */
const nonNegativeInt = z.coerce
  .number({ error: 'must be an integer' })
  .int('must be an integer')
  .min(0, 'must be 0 or more');
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const postgresUrl = z
  .string()
  .refine((v) => /^postgres(ql)?:\/\//.test(v) && URL.canParse(v), 'must be a postgres:// or postgresql:// URL');
const redisUrl = z
  .string()
  .refine((v) => /^rediss?:\/\//.test(v) && URL.canParse(v), 'must be a redis:// or rediss:// URL');
/** a Kubernetes resource.Quantity of bytes, as a claim's storage request takes it */
const quantity = z
  .string()
  .regex(/^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$/, 'must be a Kubernetes quantity such as 10Gi');
const namespaceName = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** a number of CPUs (a CFS quota is at least 1 ms of each 100 ms), or no bound: undefined */
const cpus = z
  .string()
  .trim()
  .refine(
    (v) => v === 'max' || (/^\d+(\.\d+)?$/.test(v) && (Number(v) === 0 || Number(v) >= 0.01)),
    'must be a number of CPUs such as 1 or 0.5 (at least 0.01), or 0 or max for no bound',
  )
  .transform((v) => (v === 'max' || Number(v) === 0 ? undefined : Number(v)));
const httpUrl = z.string().refine((v) => /^https?:\/\//.test(v) && URL.canParse(v), 'must be an http(s) URL');

function isCidr(value: string): boolean {
  const [address, bits, extra] = value.split('/');
  if (extra !== undefined || !address || bits === undefined || !/^\d+$/.test(bits)) return false;
  const family = isIP(address);
  return family !== 0 && Number(bits) <= (family === 4 ? 32 : 128);
}
const cidrList = z
  .string()
  .transform((v) =>
    v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  )
  .refine((list) => list.every(isCidr), 'must be a comma-separated list of CIDR ranges such as 10.0.0.0/8');

interface Setting {
  schema: z.ZodType;
  default?: string;
  description: string;
}

export const SETTINGS = {
  PORT: { schema: port, default: '8080', description: 'HTTP port of the control plane.' },
  HOST: {
    schema: z.string().min(1),
    description: 'Address to listen on. Default 127.0.0.1 in embedded mode (one developer), 0.0.0.0 in server mode.',
  },
  AILERON_DATA_DIR: {
    schema: z.string().min(1),
    default: './.aileron',
    description: 'Embedded mode: where the PGlite database, the admin token and generated keys live.',
  },
  DATABASE_URL: { schema: postgresUrl, description: 'PostgreSQL URL. Setting it selects the server mode.' },
  DATABASE_POOL_SIZE: {
    schema: positiveInt,
    default: '10',
    description: 'Server mode: PostgreSQL connections per process.',
  },
  REDIS_URL: {
    schema: redisUrl,
    description: 'Redis URL. Jobs run on BullMQ through it; without it they run in-process.',
  },
  AILERON_QUEUE_PREFIX: {
    schema: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 letters, digits, _ or -'),
    default: 'aileron',
    description:
      'Prefix of every key and pub/sub channel in Redis (BullMQ queues, rate limits, the MCP session directory, the message bus), so several installations can share one Redis.',
  },
  AILERON_RUN_WORKERS: {
    schema: bool,
    description:
      'Run the job processors inside the control plane. Default true without REDIS_URL, false with it (run `apps/worker` instead).',
  },
  AILERON_PUBLIC_URL: {
    schema: httpUrl,
    description:
      'The URL people and gateways reach the control plane at (links in messages). Default http://localhost:PORT.',
  },
  AILERON_REPLICA_URL: {
    schema: httpUrl,
    description:
      'How other control-plane replicas reach this one directly (e.g. http://$(POD_IP):8080), so any replica can serve any MCP session. Default http://127.0.0.1:PORT (replicas on one machine). Set, a replica forwards only to replicas of the same scheme and port: give every replica one scheme and port, or requests for sessions held elsewhere are answered 404 MCP_SESSION_NOT_FOUND (logged once).',
  },
  LOG_LEVEL: {
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    default: 'info',
    description: 'fatal, error, warn, info, debug, trace or silent. Logs are JSON lines on stdout.',
  },
  UPSTREAM_ALLOW_CIDRS: {
    schema: cidrList,
    default: '',
    description:
      'Private address ranges that upstream MCP URLs and webhook targets may reach despite the SSRF rules. Embedded mode also allows loopback.',
  },
  AILERON_JWT_TTL_SECONDS: {
    schema: positiveInt,
    default: '3600',
    description: 'Lifetime of the admin JWTs the control plane issues (POST /v1/auth/token).',
  },
  AILERON_OAUTH_ACCESS_TOKEN_TTL_SECONDS: {
    schema: positiveInt,
    default: '900',
    description:
      'Lifetime of the OAuth access tokens MCP clients get for a workspace MCP endpoint (docs/oauth.md); clients refresh them.',
  },
  AILERON_OAUTH_REFRESH_TOKEN_TTL_SECONDS: {
    schema: positiveInt,
    default: '2592000',
    description:
      'Lifetime of an OAuth refresh token; each refresh replaces it with a new one (rotation). A client unused this long signs in again.',
  },
  AILERON_OAUTH_HTTP_CLIENT_IDS: {
    schema: bool,
    default: 'false',
    description:
      'Accept Client ID Metadata Documents at plain http URLs on this machine (localhost, 127.0.0.1, [::1]), and let the pool offer its own at a plain http public URL on loopback: for tests and local clients only; elsewhere client ids must be https.',
  },
  AILERON_OUTBOX_POLL_MS: {
    schema: positiveInt,
    default: '1000',
    description:
      "The outbox sweep's tick. A tick looks at the database when a hand-over failed, when Redis came back or a worker recorded messages (it says so on the bus), and every tenth tick otherwise, for the messages of a process that died.",
  },
  AILERON_SHUTDOWN_GRACE_SECONDS: {
    schema: positiveInt,
    default: '10',
    description:
      "How long a stopping process (SIGTERM, Ctrl-C) lets the work under way finish: long-polls and held calls answer at once, other requests get this long; then their connections are closed, and after twice this long it stops waiting and names what it waited on. Keep it below Kubernetes' terminationGracePeriodSeconds (30 in the Helm chart).",
  },
  AILERON_ROOT_KEY: {
    schema: z.string().min(1),
    description:
      'Root key(s) that wrap every key kept at rest: base64 of 32 random bytes (`openssl rand -base64 32`); comma-separated, the first seals and the others still open (rotation). Never echoed.',
  },
  AILERON_ROOT_KEY_FILE: {
    schema: z.string().min(1),
    description:
      'File holding the root key(s), one per line, first current. Without this or AILERON_ROOT_KEY the first start generates `<data dir>/root-keys` (0600); server-mode replicas must share one.',
  },
  AILERON_VAULT_KEEP_VERSIONS: {
    schema: positiveInt,
    default: '10',
    description: 'How many versions of each secret the vault keeps; older ones are removed when a new one is written.',
  },
  AILERON_AUDIT_CHECKPOINT_EVERY: {
    schema: positiveInt,
    default: '1000',
    description:
      'A signed audit checkpoint after at most this many records of a chain (and at least every AILERON_AUDIT_CHECKPOINT_SECONDS).',
  },
  AILERON_AUDIT_CHECKPOINT_SECONDS: {
    schema: positiveInt,
    default: '60',
    description: 'The longest time new audit records wait for a signed checkpoint.',
  },
  AILERON_WEBHOOK_PAUSE_AFTER_SECONDS: {
    schema: positiveInt,
    default: '86400',
    description:
      'A webhook endpoint whose deliveries have failed for longer than this (with no success in between) is paused until resumed.',
  },
  AILERON_SANDBOX_DRIVER: {
    schema: z.enum(['local', 'kubernetes'], { message: 'must be local or kubernetes' }),
    default: 'local',
    description: 'Where sandboxes run: bubblewrap on this machine (one control plane) or Kubernetes pods.',
  },
  AILERON_SANDBOX_IMAGE: {
    schema: z.string(),
    default: '',
    description:
      'The image of Kubernetes sandboxes (default ghcr.io/aileron/sandbox-base:<version>); it must carry the label ai.aileron.mcp.version.',
  },
  AILERON_SANDBOX_VERSION_MISMATCH: {
    schema: z.enum(['refuse', 'warn'], { message: 'must be refuse or warn' }),
    default: 'refuse',
    description:
      'A sandbox whose image reports another ai.aileron.mcp.version than this control plane: refused (stopped, the call fails naming both versions) or used with a warning.',
  },
  AILERON_SANDBOX_K8S_NAMESPACE: {
    schema: z
      .string()
      .max(63, 'must be a Kubernetes namespace name')
      .regex(namespaceName, 'must be a Kubernetes namespace name')
      .or(z.literal('')),
    default: '',
    description:
      "Namespace of Kubernetes sandboxes: their pods, claims, Secrets and NetworkPolicies. Default: the pool's, AILERON_K8S_NAMESPACE, which is refused when the pool runs on Kubernetes too (the sandboxes read their runners' Secrets back, so their namespace must hold no one else's).",
  },
  AILERON_SANDBOX_FILES_SIZE: {
    schema: quantity,
    default: '10Gi',
    description:
      "Size of a sandbox's /src: a Kubernetes sandbox's files claim (a tar.gz source may unpack to at most this much); locally, measured after each change, beyond it writes are refused (SANDBOX_FULL).",
  },
  AILERON_SANDBOX_HISTORY_SIZE: {
    schema: quantity,
    default: '2Gi',
    description: "Size of a Kubernetes sandbox's history claim (the snapshots' git directory).",
  },
  AILERON_SANDBOX_STORAGE_CLASS: {
    schema: z.string().regex(/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$/, 'must be a StorageClass name'),
    default: '',
    description: "StorageClass of a Kubernetes sandbox's claims. Empty: the cluster's default.",
  },
  AILERON_SANDBOX_SNAPSHOTS: {
    schema: z.enum(['on', 'off'], { message: 'must be on or off' }),
    default: 'on',
    description:
      'off: changes are not committed to aileron/snapshots (throwaway sandboxes, and the baseline of the sandbox benchmark).',
  },
  AILERON_SANDBOX_SNAPSHOT_MAX_FILES: {
    schema: positiveInt,
    default: '200000',
    description:
      'A sandbox whose /src holds more files than this (after its .gitignore files) is not snapshotted; the failure is logged and reported as sandbox.snapshot_failed.',
  },
  AILERON_SANDBOX_SNAPSHOT_MAX_BYTES: {
    schema: positiveInt,
    default: String(512 * 1024 * 1024),
    description:
      'The most bytes of changed files one snapshot stores; a larger change is not snapshotted (reported as sandbox.snapshot_failed). A single file over 64 MiB is left out and named in the commit message.',
  },
  AILERON_SANDBOX_SNAPSHOT_TIMEOUT_SECONDS: {
    schema: positiveInt,
    default: '120',
    description: 'How long one attempt at a snapshot may take before it is given up and tried again.',
  },
  AILERON_SANDBOX_IDLE_SECONDS: {
    schema: positiveInt,
    default: '900',
    description:
      'A sandbox nobody has used for this long stops; its files stay, and the next tool call starts it again.',
  },
  AILERON_SANDBOX_BASH_TIMEOUT_MS: {
    schema: positiveInt,
    default: '120000',
    description:
      'How long a `bash` call may run when it names no timeout; then it is killed with every process it started.',
  },
  AILERON_SANDBOX_BASH_MAX_TIMEOUT_MS: {
    schema: positiveInt,
    default: '600000',
    description: 'The longest timeout a `bash` call may ask for.',
  },
  AILERON_SANDBOX_EGRESS: {
    schema: z.enum(['off', 'admins'], { message: 'must be off or admins' }),
    default: 'off',
    description:
      "Who may make a sandbox with `network: egress` (403 SANDBOX_EGRESS_DISABLED when off, SANDBOX_EGRESS_FORBIDDEN for a workspace's members): nobody, or a workspace's owners and admins. It reaches the public internet and AILERON_POOL_EGRESS_ALLOW_CIDRS, never the host, private, link-local or metadata addresses.",
  },
  AILERON_SANDBOX_MAX_PER_WORKSPACE: {
    schema: positiveInt,
    default: '20',
    description: 'How many sandboxes a workspace may have; one more is refused (409 SANDBOX_LIMIT_REACHED).',
  },
  AILERON_SANDBOX_DEFAULT_PIDS: {
    schema: positiveInt,
    default: '512',
    description: "Local driver: a sandbox's `pids` when its create request names none (processes and threads at once).",
  },
  AILERON_SANDBOX_DEFAULT_MEMORY_MB: {
    schema: positiveInt,
    default: '4096',
    description:
      "Local driver: a sandbox's `memory_mb` when its create request names none (the memory each process may write to; the sandbox as a whole gets it plus its /tmp and home and 256 MiB, where there is a memory cgroup).",
  },
  AILERON_SANDBOX_DEFAULT_CPU_SECONDS: {
    schema: positiveInt,
    default: '1800',
    description:
      "Local driver: a sandbox's `cpu_seconds` when its create request names none (the CPU time of each process).",
  },
  AILERON_SANDBOX_CPUS: {
    schema: cpus,
    default: '1',
    description:
      "Local driver: the CPUs' worth of time one sandbox may take at once, all its processes together (`0.5`: half of one CPU, `2`: two), where the machine gives the control plane a cpu cgroup; `0` or `max`: no bound.",
  },
  AILERON_SANDBOX_TMPFS_MB: {
    schema: positiveInt,
    default: '512',
    description:
      "Local driver: the size of a sandbox's /tmp and of its home directory, each a tmpfs in the host's memory.",
  },
  AILERON_SANDBOX_UID_BASE: {
    schema: positiveInt,
    default: '1879048192',
    description:
      'Local driver, control plane running as root: each sandbox runs as a host uid of its own from this one up (65536 of them); nothing else on the machine may use them.',
  },
  AILERON_SANDBOX_SOURCE_MAX_BYTES: {
    schema: positiveInt,
    default: String(256 * 1024 * 1024),
    description: 'The largest source upload (git bundle or tar.gz) a sandbox accepts; a larger one answers 413.',
  },
  AILERON_POOL_DRIVER: {
    schema: z.enum(['local', 'kubernetes'], { message: 'must be local or kubernetes' }),
    default: 'local',
    description: 'Where remote MCP server instances run: local processes (under bubblewrap) or Kubernetes pods.',
  },
  AILERON_POOL_SANDBOX: {
    schema: z.enum(['bubblewrap', 'none'], { message: 'must be bubblewrap or none' }),
    default: 'bubblewrap',
    description:
      'Isolation of local instances. `none` runs them as plain child processes: only for machines without bubblewrap, never for several tenants.',
  },
  AILERON_POOL_UID_BASE: {
    // its last uid must be a valid one: below 2^32 - 1, which means "no uid" to the kernel
    schema: positiveInt.max(4_294_901_759, 'must be at most 4294901759 (its 65536 uids end below 2^32 - 1)'),
    default: '1879113728',
    description:
      "Local driver under bubblewrap, control plane running as root: the instances of each (workspace, server) run as a host uid of their own from this one up (65536 of them), apart from `AILERON_SANDBOX_UID_BASE`'s; nothing else on the machine may use them.",
  },
  AILERON_POOL_IDLE_SECONDS: {
    schema: positiveInt,
    default: '600',
    description: 'An instance no MCP session has used for this long is stopped; the next call starts it again.',
  },
  AILERON_POOL_SESSION_IDLE_SECONDS: {
    // a client sends `notifications/initialized` after `initialize` and may be slow to (a loaded
    // machine, a person at a prompt): a bound of seconds would end sessions before they are open
    schema: positiveInt.min(30, 'must be at least 30 (a client may take seconds between its first two requests)'),
    default: '600',
    description:
      'An MCP session with no request and no open stream for this long is ended, with its upstream sessions; the client starts a new one. Ending a session (DELETE) ends it at once.',
  },
  AILERON_POOL_MAX_INSTANCES_PER_WORKSPACE: {
    schema: positiveInt,
    default: '10',
    description: 'Running instances one workspace may have at once; more answers 429 POOL_INSTANCE_LIMIT.',
  },
  AILERON_POOL_MAX_CONCURRENT_CALLS: {
    schema: positiveInt,
    default: '32',
    description:
      'Requests in flight to one instance at once; more get a JSON-RPC error (code -32001) naming the limit.',
  },
  AILERON_POOL_APPROVAL_WAIT_SECONDS: {
    schema: nonNegativeInt,
    default: '30',
    description:
      'How long a tools/call that needs approval waits for the decision before answering with the approval id and review URL (0: answer at once).',
  },
  AILERON_POOL_CONNECT_WAIT_SECONDS: {
    schema: nonNegativeInt,
    default: '120',
    description:
      'How long a tools/call whose upstream needs an OAuth connection waits for the person to connect, after an MCP client that can show URLs (URL elicitation) took the link (0: answer with the link at once).',
  },
  AILERON_POOL_MEMORY_MB: {
    schema: positiveInt,
    default: '512',
    description: 'Memory limit of one instance (Kubernetes pods).',
  },
  AILERON_POOL_CPU_MILLIS: {
    schema: positiveInt,
    default: '500',
    description: 'CPU limit of one instance in millicores (Kubernetes pods).',
  },
  AILERON_POOL_RUNNER_IMAGE: {
    schema: z.string().min(1),
    default: 'ghcr.io/aileron/mcp-runner:0.1.0',
    description: 'Image that runs stdio catalog servers behind the Streamable HTTP bridge in Kubernetes.',
  },
  AILERON_POOL_EGRESS_ALLOW_CIDRS: {
    schema: cidrList,
    default: '',
    description:
      'Kubernetes pool pods may reach the public internet and cluster DNS only; these address ranges (comma-separated CIDRs) are let through besides, e.g. a private API the servers need.',
  },
  AILERON_POOL_EGRESS_EXCEPT_CIDRS: {
    schema: cidrList.refine((list) => list.every((cidr) => !cidr.endsWith('/0')), 'must name ranges narrower than /0'),
    default: '',
    description:
      "Address ranges (comma-separated CIDRs) Kubernetes pool pods and egress sandboxes must not reach, besides the private, loopback, link-local and reserved ranges always kept from them: the cluster's global (public) IPv6 pod and service ranges, which otherwise count as the internet, e.g. 2001:db8:42::/56.",
  },
  AILERON_K8S_NAMESPACE: {
    schema: z.string().regex(namespaceName, 'must be a Kubernetes namespace name'),
    default: 'aileron-pool',
    description:
      'Namespace of pool pods and their secrets. The cluster comes from the in-cluster service account, else KUBECONFIG.',
  },
  AILERON_POD_NAME: {
    schema: z
      .string()
      .max(253, 'must be a Kubernetes Pod name')
      .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, 'must be a Kubernetes Pod name'),
    description:
      "The control plane's own Pod name (downward API `metadata.name`). Pool pods are labelled with it, and at start the Kubernetes driver deletes those an earlier run of this replica left. Outside a cluster: any name no other control plane using the namespace has.",
  },
  AILERON_POD_UID: {
    schema: z
      .string()
      .regex(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/, 'must be a Pod UID'),
    description:
      "The control plane's own Pod UID (downward API `metadata.uid`), with AILERON_POD_NAME. Pool pods are owned by that Pod, so Kubernetes deletes them when it goes (only when it runs in AILERON_K8S_NAMESPACE).",
  },
  AILERON_POD_NAMESPACE: {
    schema: z
      .string()
      .max(63, 'must be a Kubernetes namespace name')
      .regex(namespaceName, 'must be a Kubernetes namespace name'),
    description:
      "The control plane's own namespace (downward API `metadata.namespace`). Each pool instance's and sandbox's NetworkPolicy admits the control plane's pods from there; unset, only from the instance's own namespace, so another policy must let the control plane in.",
  },
  AILERON_POOL_AUDIT_BATCH_MS: {
    schema: positiveInt,
    default: '200',
    description:
      'How long execution records wait before their batch is due to be written to the audit log; a due batch is written in a pause of the calls (`AILERON_POOL_AUDIT_QUIET_MS`), at the latest an interval later. They are in the journal under the data dir before the client hears back.',
  },
  AILERON_POOL_AUDIT_QUIET_MS: {
    schema: nonNegativeInt,
    default: '5',
    description:
      'How long a due batch of execution records waits for a pause in the calls (no record for this long) before it is written, so that an agent calling in a tight loop does not wait for it; 0 writes it at the first moment no call waits for its answer.',
  },
  AILERON_RATE_LIMIT_WORKSPACE_PER_MINUTE: {
    schema: positiveInt,
    default: '6000',
    description: 'MCP requests per minute one workspace may make through /mcp; more answer 429 with Retry-After.',
  },
  AILERON_RATE_LIMIT_PRINCIPAL_PER_MINUTE: {
    schema: positiveInt,
    default: '1200',
    description: 'MCP requests per minute one caller (token, user or gateway) may make through /mcp.',
  },
  AILERON_RATE_LIMIT_WITHOUT_REDIS: {
    schema: z.enum(['open', 'closed'], { message: 'must be open or closed' }),
    default: 'open',
    description:
      'What the MCP rate limits do while Redis is away (server mode): `open` counts on each replica alone, so the installation allows up to that many times the limits (logged once per outage); `closed` refuses MCP requests with 503 REDIS_UNAVAILABLE and Retry-After.',
  },
  AILERON_CONFIG_FILE: {
    schema: z.string().min(1),
    description: 'Optional JSON or YAML file with any of these settings; the environment wins over it.',
  },
} satisfies Record<string, Setting>;

export type SettingName = keyof typeof SETTINGS;

/** What a setting's schema makes of its text. */
export type SettingValue<K extends SettingName> = z.output<(typeof SETTINGS)[K]['schema']>;

type WithDefault = { [K in SettingName]: (typeof SETTINGS)[K] extends { default: string } ? K : never }[SettingName];

/** Every setting once validated: one with a default always has a value, the others may be unset. */
export type SettingValues = { [K in WithDefault]: SettingValue<K> } & {
  [K in Exclude<SettingName, WithDefault>]?: SettingValue<K>;
};

export function describeSettings(): { name: SettingName; default?: string; description: string }[] {
  return (Object.keys(SETTINGS) as SettingName[]).map((name) => {
    const setting: Setting = SETTINGS[name];
    return {
      name,
      ...(setting.default !== undefined ? { default: setting.default } : {}),
      description: setting.description,
    };
  });
}
