import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { OutboundPolicy } from '@aileron/net';

/**
 * Where remote MCP servers run. The pool decides when an instance starts and
 * stops; a driver only knows how to run one and how to reach it. An instance
 * is reached over MCP Streamable HTTP (a URL upstream; a pod, whose stdio
 * server the bridge program, `apps/mcp-bridge`, fronts), or as a transport
 * in this process (a built-in server; a local instance, whose every session
 * is the stdio of a child of its own in the instance's sandbox).
 */

/** What to run for one (workspace, server, version). */
export interface InstanceSpec {
  /** unique per start; safe as a DNS label (lowercase alnum and '-', ≤ 63) */
  id: string;
  organizationId: string;
  organizationSlug: string;
  workspaceId: string;
  workspaceSlug: string;
  server: string;
  version: string;
  /** a stdio command (run behind the bridge) or an image serving Streamable HTTP itself */
  run: { kind: 'command'; command: string; args: string[] } | { kind: 'image'; image: string; args: string[] };
  /**
   * The instance's whole environment besides what the driver itself needs
   * (PATH, HOME): literal values and secrets already resolved from the vault.
   * Never logged, never put on a command line.
   */
  env: Record<string, string>;
  /**
   * The secret values among `env` (resolved vault references): anything the
   * instance prints is scrubbed of them before it reaches a log.
   */
  secrets: string[];
  limits: { memoryMb: number; cpuMillis: number };
}

/** How the proxy reaches a running instance. */
export interface InstanceEndpoint {
  /** Streamable HTTP endpoint, e.g. http://127.0.0.1:41234/mcp */
  url: string;
  /**
   * Headers the proxy adds to every upstream request: the per-instance bearer
   * secret the bridge demands, so another local process that finds the port
   * cannot talk to a tenant's instance.
   */
  headers: Record<string, string>;
  /**
   * For servers elsewhere (a catalog `url`): the SSRF rules every connection
   * to it must pass, checked on the address each socket resolves to, not only
   * when the instance starts (DNS rebinding). Our own instances have none.
   */
  outbound?: OutboundPolicy;
}

/**
 * A server reached inside this process: each upstream session gets its own
 * end of an in-process connection, and `attach` connects a server to it (one
 * the control plane serves itself, BuiltinServers, or a local instance's
 * child speaking stdio).
 */
export interface InProcessEndpoint {
  attach(transport: Transport): Promise<void>;
}

export interface InstanceExit {
  /** why it ended, for people: "exited with code 1", "killed by SIGKILL", "pod Failed: OOMKilled" */
  reason: string;
  /** true when the pool asked for it (stop, idle, kill switch) */
  requested: boolean;
}

/** `E`: how the instance is reached; over HTTP but for local instances and built-in servers */
export interface RunningInstance<E extends InstanceEndpoint | InProcessEndpoint = InstanceEndpoint> {
  readonly id: string;
  readonly endpoint: E;
  /** the OS process id where there is one (local driver), for operators and tests */
  readonly pid?: number;
  /** settles once, when the instance is gone for whatever reason; never rejects */
  readonly exited: Promise<InstanceExit>;
  /** answers false rather than throwing; bounded by the driver's own timeout */
  healthy(): Promise<boolean>;
  /** idempotent; resolves when the instance and everything it owned (dirs, pods, secrets) are gone */
  stop(): Promise<void>;
}

export interface InstanceDriver {
  readonly kind: 'local' | 'kubernetes';
  /**
   * Resolves once the instance accepts MCP requests; rejects with
   * InstanceStartError (with a reason fit for a user: no secrets) otherwise.
   */
  start(spec: InstanceSpec): Promise<RunningInstance<InstanceEndpoint | InProcessEndpoint>>;
  /** stops everything this driver still runs (shutdown) */
  close(): Promise<void>;
}

export class InstanceStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InstanceStartError';
  }
}
