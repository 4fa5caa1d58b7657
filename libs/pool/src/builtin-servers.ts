import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { Injectable } from '@nestjs/common';
import { Clock } from '@aileron/clock';
import type { Principal, WorkspaceScope } from '@aileron/auth';
import type { InProcessEndpoint, InstanceExit } from './drivers/driver';
import { Instance } from './pool-instances.service';

/**
 * A server the control plane serves itself (the sandbox tools) rather than
 * an instance it starts. It is reached through the pool like any server, so
 * the policy, approvals, tool pins, caveat tokens and the execution records
 * apply to it unchanged. Each upstream session connects to a server of its
 * own in this process (no socket, no encoding: the messages pass as values),
 * so it knows who calls.
 */
export interface BuiltinServer {
  /** reserved: no catalog server may take it */
  name: string;
  version: string;
  /** whether `/mcp/{ws}` lists it (`/mcp/{ws}/{name}` always reaches it) */
  present(scope: WorkspaceScope): Promise<boolean>;
  /** Connects a server of its own for one upstream session of this caller to `transport` (in this process). */
  connect(scope: WorkspaceScope, caller: Principal, transport: Transport): Promise<void>;
}

/** Where domains register the servers they serve (as auth's credential resolvers). */
@Injectable()
export class BuiltinServers {
  private readonly servers = new Map<string, BuiltinServer>();

  constructor(private readonly clock: Clock) {}

  register(server: BuiltinServer): void {
    this.servers.set(server.name, server);
  }

  has(name: string): boolean {
    return this.servers.has(name);
  }

  async present(scope: WorkspaceScope): Promise<string[]> {
    const all = [...this.servers.values()];
    const here = await Promise.all(all.map((server) => server.present(scope)));
    return all.filter((_, i) => here[i]).map((server) => server.name);
  }

  /** An instance for one MCP session: it lives as long as the upstream session that uses it. */
  async acquire(scope: WorkspaceScope, caller: Principal, name: string, maxInflight: number): Promise<Instance> {
    const server = this.servers.get(name)!;
    const endpoint: InProcessEndpoint = { attach: (transport) => server.connect(scope, caller, transport) };
    let settle!: (exit: InstanceExit) => void;
    const ended = new Promise<InstanceExit>((resolve) => (settle = resolve));
    return new Instance(
      `builtin-${name}`,
      name,
      server.version,
      endpoint,
      ended,
      null,
      settle,
      maxInflight,
      this.clock,
    );
  }
}
