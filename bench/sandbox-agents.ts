import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { BIG_TEXT } from './big-answer-server';
import { serveInWorker } from './worker-rpc';

/**
 * The `sandbox` bench's agents: SDK clients in a worker thread, each call
 * timed there from its start to its parsed answer. A module of its own, so
 * the worker loads the SDK's client and nothing of the control plane.
 */
export const AGENTS_ROLE = 'sandbox-bench-agents';

export type ClientCommand =
  | { type: 'connect'; url: string; token: string }
  /** `big`: the answer's text must be BIG_TEXT (checked after the clock stops) */
  | { type: 'call'; client: number; name: string; arguments: Record<string, unknown>; big?: boolean }
  | { type: 'close' };
export type ClientAnswer = { client: number } | { ms: number } | { closed: true };

function clientsWorker(): (command: ClientCommand) => Promise<ClientAnswer> {
  const clients: Client[] = [];
  return async (command) => {
    switch (command.type) {
      case 'connect': {
        const c = new Client({ name: 'sandbox-bench', version: '1.0.0' });
        await c.connect(
          new StreamableHTTPClientTransport(new URL(command.url), {
            requestInit: { headers: { authorization: `Bearer ${command.token}` } },
          }),
        );
        return { client: clients.push(c) - 1 };
      }
      case 'call': {
        const started = performance.now();
        const result = await clients[command.client]!.callTool({ name: command.name, arguments: command.arguments });
        const ms = performance.now() - started;
        if (result.isError) throw new Error(`${command.name}: ${JSON.stringify(result).slice(0, 300)}`);
        if (command.big && (result.content as { type: string; text: string }[])[0]?.text !== BIG_TEXT)
          throw new Error(`${command.name}: not the 1 MiB expected`);
        return { ms };
      }
      case 'close':
        for (const c of clients) await c.close().catch(() => undefined);
        return { closed: true };
    }
  };
}

serveInWorker(AGENTS_ROLE, clientsWorker);
