import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import type { RequestTaskStore } from '@modelcontextprotocol/sdk/shared/protocol.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  type CallToolResult,
  type ClientCapabilities,
} from '@modelcontextprotocol/sdk/types.js';
import { expect } from 'vitest';
import type { TestControlPlane } from '../support/control-plane';

/** What server-everything's tools are answered, and the roots a client gives: the same for every client of the tests. */
export const SAMPLED = 'The sky is blue because of Rayleigh scattering.';
export const ROOTS = [{ uri: 'file:///home/ada/project', name: 'Project' }];

export interface Seen {
  sampling: Record<string, unknown>[];
  elicitations: Record<string, unknown>[];
  rootsRequests: number;
  logs: { level: string; data: unknown }[];
  updated: string[];
  listChanged: number;
  errors: string[];
}

/**
 * An SDK client that answers like a person at a real client would: a fixed
 * sampled text, accepted forms, the project's roots; with a task store it runs
 * sampling and elicitation as tasks when the server asks for that.
 */
export async function open(
  cp: TestControlPlane,
  path: string,
  capabilities: ClientCapabilities,
  withTasks = false,
): Promise<{ client: Client; seen: Seen; roots: { uri: string; name: string }[] }> {
  const seen: Seen = {
    sampling: [],
    elicitations: [],
    rootsRequests: 0,
    logs: [],
    updated: [],
    listChanged: 0,
    errors: [],
  };
  const roots = [...ROOTS];
  const client = new Client(
    { name: 'everything-test', version: '1.0.0' },
    { capabilities, ...(withTasks ? { taskStore: new InMemoryTaskStore() } : {}) },
  );
  client.onerror = (error) => seen.errors.push(error.message);
  const asTaskIfAsked = async (
    request: { params: { task?: unknown } },
    extra: { taskStore?: RequestTaskStore; taskRequestedTtl?: number },
    result: Record<string, unknown>,
  ) => {
    if (!request.params.task || !extra.taskStore) return result;
    const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? null });
    await extra.taskStore.storeTaskResult(task.taskId, 'completed', result);
    return { task };
  };
  client.setRequestHandler(CreateMessageRequestSchema, async (request, extra) => {
    seen.sampling.push(request.params as Record<string, unknown>);
    return (await asTaskIfAsked(request, extra, {
      role: 'assistant',
      content: { type: 'text', text: SAMPLED },
      model: 'test-model',
      stopReason: 'endTurn',
    })) as never;
  });
  client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
    seen.elicitations.push(request.params as Record<string, unknown>);
    if (request.params.mode === 'url') return { action: 'accept' };
    const properties = (
      request.params.requestedSchema as { properties: Record<string, { oneOf?: { const: string }[] }> }
    ).properties;
    const answers: Record<string, string | number | boolean> = {
      name: 'Ada Lovelace',
      check: true,
      email: 'ada@example.com',
      integer: 42,
      favoriteColor: 'Blue',
      agreeToTerms: true,
    };
    const content = Object.fromEntries(Object.entries(answers).filter(([key]) => key in properties));
    if (properties.interpretation) content.interpretation = properties.interpretation.oneOf![1]!.const;
    return (await asTaskIfAsked(request, extra, { action: 'accept', content })) as never;
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    seen.rootsRequests++;
    return { roots };
  });
  client.setNotificationHandler(
    LoggingMessageNotificationSchema,
    (n) => void seen.logs.push({ level: n.params.level, data: n.params.data }),
  );
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void seen.updated.push(n.params.uri));
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => void seen.listChanged++);
  const transport = new StreamableHTTPClientTransport(new URL(`${cp.url}${path}`), {
    requestInit: { headers: { authorization: `Bearer ${cp.ownerToken}` } },
  });
  await client.connect(transport);
  return { client, seen, roots };
}

export async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

export type StreamMessage = { type: string; result?: unknown; error?: unknown };

export async function collect(stream: AsyncIterable<StreamMessage>): Promise<StreamMessage[]> {
  const messages: StreamMessage[] = [];
  for await (const message of stream) messages.push(message);
  return messages;
}

export function resultOf(messages: StreamMessage[]): CallToolResult {
  const last = messages.at(-1)!;
  if (last.type !== 'result') throw new Error(`the task ended with ${JSON.stringify(last)}`);
  return last.result as CallToolResult;
}

export interface SseEvent {
  id: string;
  data: string;
}

/** A bare Streamable HTTP client, for what the SDK client does not let a test steer: when a stream breaks. */
export function rawSession(cp: TestControlPlane, path: string) {
  const url = `${cp.url}${path}`;
  let sessionId = '';
  const headers = (): Record<string, string> => ({
    authorization: `Bearer ${cp.ownerToken}`,
    accept: 'application/json, text/event-stream',
    'content-type': 'application/json',
    ...(sessionId ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' } : {}),
  });
  // a server may answer a request with one JSON body instead of a stream: then that body is the one event
  const stream = (response: Response) => {
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    const json = response.headers.get('content-type')?.startsWith('application/json') ?? false;
    let buffer = '';
    return {
      status: response.status,
      async next(match: (event: SseEvent) => boolean): Promise<SseEvent> {
        for (;;) {
          const end = buffer.indexOf('\n\n');
          if (end >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const field = (name: string) =>
              block
                .split('\n')
                .filter((l) => l.startsWith(`${name}:`))
                .map((l) => l.slice(name.length + 1).trim())
                .join('\n');
            const event = { id: field('id'), data: field('data') };
            if (match(event)) return event;
            continue;
          }
          const { done, value } = await reader.read();
          if (done && json && buffer !== '') {
            const event = { id: '', data: buffer };
            buffer = '';
            if (match(event)) return event;
            continue;
          }
          if (done) throw new Error(`the stream ended before the event came; left: ${buffer}`);
          buffer += decoder.decode(value, { stream: true });
        }
      },
      disconnect: () => reader.cancel().catch(() => undefined),
    };
  };
  return {
    async initialize(): Promise<void> {
      const init = await fetch(url, {
        method: 'POST',
        headers: headers(),
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
        }),
      });
      expect(init.status).toBe(200);
      sessionId = init.headers.get('mcp-session-id')!;
      await stream(init).next((e) => e.data.includes('"result"'));
      const initialized = await fetch(url, {
        method: 'POST',
        headers: headers(),
        body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
      });
      expect(initialized.status).toBe(202);
    },
    post: async (message: Record<string, unknown>) =>
      stream(await fetch(url, { method: 'POST', headers: headers(), body: JSON.stringify(message) })),
    get: async (lastEventId: string) =>
      stream(await fetch(url, { method: 'GET', headers: { ...headers(), 'last-event-id': lastEventId } })),
    terminate: () => {
      const { 'content-type': _none, ...bodyless } = headers();
      return fetch(url, { method: 'DELETE', headers: bodyless });
    },
  };
}
