import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { serveInWorker, WorkerClients } from './worker-rpc';

/**
 * The load of the MCP benches (`proxy`, `peers`): SDK clients in a worker
 * thread, on whatever MCP endpoints a bench names, each asked to call one
 * tool. A module of its own, so the worker loads the SDK's client and none of
 * the control plane.
 */
const ROLE = 'mcp-bench-load';

/** The call a target's clients make, and the text its answer must hold: a refusal is fast and must never count. */
export interface ToolCall {
  name: string;
  arguments: Record<string, unknown>;
  /** undefined: any answer that is not an error */
  expected?: string;
}

export interface LoadTarget {
  key: string;
  url: string;
  headers: Record<string, string>;
  /** SDK clients, each its own MCP session; the first one makes the sequential calls */
  clients: number;
  call: ToolCall;
}

type LoadCommand =
  | { type: 'connect'; target: LoadTarget }
  | { type: 'latency'; keys: string[]; calls: number; block: number }
  | { type: 'throughput'; key: string; seconds: number }
  | { type: 'each'; key: string }
  | { type: 'answered'; key: string }
  | { type: 'disconnect'; key: string }
  | { type: 'close' };

type LoadAnswer =
  | { sessions: string[] }
  | { answered: number[] }
  | { samples: Record<string, number[]> }
  | { calls: number; ms: number }
  | { closed: true };

function loadWorker(): (command: LoadCommand) => Promise<LoadAnswer> {
  const targets = new Map<string, { clients: Client[]; call: ToolCall }>();
  /** calls answered as expected, per client: what a proxy's audit log must hold */
  const answered = new Map<Client, number>();

  async function call(client: Client, key: string): Promise<void> {
    const { call: tool } = targets.get(key)!;
    const result = await client.callTool({ name: tool.name, arguments: tool.arguments });
    const text = ((result.content as { type: string; text?: string }[] | undefined) ?? [])
      .map((c) => c.text ?? '')
      .join('');
    if (result.isError || (tool.expected !== undefined && text !== tool.expected))
      throw new Error(`${key}: unexpected answer ${JSON.stringify(result).slice(0, 300)}`);
    answered.set(client, (answered.get(client) ?? 0) + 1);
  }

  async function end(clients: Client[]): Promise<void> {
    for (const client of clients) {
      await (client.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
      await client.close().catch(() => undefined);
    }
  }

  async function handle(command: LoadCommand): Promise<LoadAnswer> {
    switch (command.type) {
      case 'connect': {
        const { key, url, headers, call: tool } = command.target;
        const list: Client[] = [];
        const sessions: string[] = [];
        for (let i = 0; i < command.target.clients; i++) {
          const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
          const client = new Client({ name: `bench-${key}-${i}`, version: '1.0.0' });
          await client.connect(transport);
          const tools = await client.listTools();
          if (!tools.tools.some((listed) => listed.name === tool.name))
            throw new Error(`${key}: ${tool.name} is not listed`);
          list.push(client);
          sessions.push(transport.sessionId ?? '');
        }
        targets.set(key, { clients: list, call: tool });
        return { sessions };
      }
      case 'latency': {
        const samples: Record<string, number[]> = Object.fromEntries(command.keys.map((key) => [key, []]));
        const blocks = Math.ceil(command.calls / command.block);
        for (let b = 0; b < blocks; b++) {
          // rotate which target goes first: drift within a round lands on all of them
          const order = command.keys.map((_, i) => command.keys[(i + b) % command.keys.length]!);
          for (const key of order) {
            const client = targets.get(key)!.clients[0]!;
            const n = Math.min(command.block, command.calls - b * command.block);
            for (let i = 0; i < n; i++) {
              const started = performance.now();
              await call(client, key);
              samples[key]!.push(performance.now() - started);
            }
          }
        }
        return { samples };
      }
      case 'throughput': {
        const list = targets.get(command.key)!.clients;
        let calls = 0;
        const started = performance.now();
        const deadline = started + command.seconds * 1000;
        await Promise.all(
          list.map(async (client) => {
            while (performance.now() < deadline) {
              await call(client, command.key);
              calls++;
            }
          }),
        );
        return { calls, ms: performance.now() - started };
      }
      case 'each':
        await Promise.all(targets.get(command.key)!.clients.map((client) => call(client, command.key)));
        return { answered: targets.get(command.key)!.clients.map((client) => answered.get(client) ?? 0) };
      case 'answered':
        return { answered: targets.get(command.key)!.clients.map((client) => answered.get(client) ?? 0) };
      case 'disconnect':
        await end(targets.get(command.key)?.clients ?? []);
        targets.delete(command.key);
        return { closed: true };
      case 'close': {
        for (const { clients } of targets.values()) await end(clients);
        targets.clear();
        return { closed: true };
      }
    }
  }

  return handle;
}

/** The main thread's handle on the load: each method waits for the worker's answer. */
export class McpLoad {
  private readonly worker = new WorkerClients<LoadCommand, LoadAnswer>(__filename, ROLE);

  /** Opens the target's sessions (and checks its tool is listed); resolves with their ids. */
  async connect(target: LoadTarget): Promise<string[]> {
    return (await this.worker.send<{ sessions: string[] }>({ type: 'connect', target })).sessions;
  }

  /** Sequential calls of each target's first client, in blocks that rotate between targets; milliseconds per call. */
  async latency(keys: string[], calls: number, block: number): Promise<Record<string, number[]>> {
    return (await this.worker.send<{ samples: Record<string, number[]> }>({ type: 'latency', keys, calls, block }))
      .samples;
  }

  /** Every client of the target calling in a closed loop for `seconds`. */
  throughput(key: string, seconds: number): Promise<{ calls: number; ms: number }> {
    return this.worker.send<{ calls: number; ms: number }>({ type: 'throughput', key, seconds });
  }

  /** One call by each client of the target, all at once; resolves with the calls answered so far, per client. */
  async each(key: string): Promise<number[]> {
    return (await this.worker.send<{ answered: number[] }>({ type: 'each', key })).answered;
  }

  /** Ends the target's sessions (DELETE). */
  async disconnect(key: string): Promise<void> {
    await this.worker.send({ type: 'disconnect', key });
  }

  /** Calls answered as expected so far, per client of the target. */
  async answered(key: string): Promise<number[]> {
    return (await this.worker.send<{ answered: number[] }>({ type: 'answered', key })).answered;
  }

  /** Ends every session (DELETE) and stops the worker. */
  close(): Promise<void> {
    return this.worker.close({ type: 'close' });
  }
}

serveInWorker(ROLE, loadWorker);
