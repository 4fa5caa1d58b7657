import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { gunzipSync } from 'node:zlib';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError, type CallToolResult, type Progress } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, describe, expect, it } from 'vitest';
import { aWorkspace, uniqueSlug } from '../support/builders';
import type { TestControlPlane } from '../support/control-plane';
import { shared } from '../support/shared-control-plane';
import { eventually } from '../support/eventually';
import { call, collect, open, rawSession, resultOf, SAMPLED, type Seen } from './everything-client';
import { aRemoteServer, SERVERS, textOf } from './mcp-client';

const EVERYTHING_DIST = resolve('node_modules/@modelcontextprotocol/server-everything/dist');

/** Tools the server registers for every client. */
const BASE_TOOLS = [
  'echo',
  'get-annotated-message',
  'get-env',
  'get-resource-links',
  'get-resource-reference',
  'get-structured-content',
  'get-sum',
  'get-tiny-image',
  'gzip-file-as-resource',
  'toggle-simulated-logging',
  'toggle-subscriber-updates',
  'trigger-long-running-operation',
];
/** Registered once the server knows the client answers roots, sampling and form elicitation. */
const CAPABILITY_TOOLS = [
  'get-roots-list',
  'trigger-sampling-request',
  'trigger-elicitation-request',
  'simulate-research-query',
];
/** Registered only for clients that run sampling/elicitation as tasks, and that open URLs. */
const TASK_AND_URL_TOOLS = [
  'trigger-sampling-request-async',
  'trigger-elicitation-request-async',
  'trigger-url-elicitation',
];

/**
 * The same conformance in both session modes: a server sharing one upstream
 * session between a workspace's MCP sessions must look, to each client, like
 * a server of its own (docs/pool.md, Shared sessions).
 */
for (const sessions of ['per_session', 'shared'] as const) {
  describe(`server-everything through /mcp/{ws}/everything (sessions: ${sessions})`, () => {
    let cp: TestControlPlane;
    let path: string;
    let client: Client;
    let seen: Seen;
    let roots: { uri: string; name: string }[];

    shared.beforeAll(async ({ sharedControlPlane }) => {
      cp = await sharedControlPlane('pglite');
      const ws = await aWorkspace(cp, cp.ownerToken);
      const policy = await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
        body: { default: 'allow', rules: [] },
      });
      expect(policy.status, policy.text).toBe(200);
      // catalog names are the organisation's: unique, as other suites may publish theirs in it
      const server = await aRemoteServer(
        cp,
        cp.ownerToken,
        ws.slug,
        { ...SERVERS.everything, env: { GREETING: 'hello from the catalog' }, sessions },
        uniqueSlug('everything'),
      );
      path = `/mcp/${ws.slug}/${server}`;
      ({ client, seen, roots } = await open(cp, path, {
        sampling: {},
        elicitation: { form: {} },
        roots: { listChanged: true },
      }));
    });
    afterAll(async () => {
      await client?.close();
    });

    it('lists every tool the server offers a client that answers sampling, forms and roots', async () => {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual([...BASE_TOOLS, ...CAPABILITY_TOOLS].sort());
      // definitions pass unchanged: titles, annotations, output schemas, task support
      const structured = tools.find((t) => t.name === 'get-structured-content')!;
      expect(structured.title).toBe('Get Structured Content Tool');
      expect(structured.outputSchema?.properties).toHaveProperty('temperature');
      expect(tools.find((t) => t.name === 'echo')!.annotations).toMatchObject({ readOnlyHint: true });
      expect(tools.find((t) => t.name === 'simulate-research-query')!.execution).toEqual({ taskSupport: 'required' });
    });

    it('runs the plain tools: echo, get-sum, get-tiny-image, get-annotated-message, get-structured-content', async () => {
      expect(textOf(await call(client, 'echo', { message: 'hello through the pool' }))).toBe(
        'Echo: hello through the pool',
      );
      expect(textOf(await call(client, 'get-sum', { a: 19, b: 23 }))).toBe('The sum of 19 and 23 is 42.');

      const image = await call(client, 'get-tiny-image');
      const png = image.content.find((c) => c.type === 'image') as { data: string; mimeType: string };
      expect(png.mimeType).toBe('image/png');
      expect(Buffer.from(png.data, 'base64').subarray(1, 4).toString('latin1')).toBe('PNG');
      expect(image.content.filter((c) => c.type === 'text').length).toBeGreaterThan(0);

      const annotated = await call(client, 'get-annotated-message', { messageType: 'error', includeImage: true });
      expect(annotated.content[0]).toEqual({
        type: 'text',
        text: 'Error: Operation failed',
        annotations: { priority: 1, audience: ['user', 'assistant'] },
      });
      expect(annotated.content[1]).toMatchObject({
        type: 'image',
        mimeType: 'image/png',
        annotations: { priority: 0.5, audience: ['user'] },
      });

      const weather = await call(client, 'get-structured-content', { location: 'Chicago' });
      expect(weather.structuredContent).toEqual({ temperature: 36, conditions: 'Light rain / drizzle', humidity: 82 });
      expect(JSON.parse(textOf(weather))).toEqual(weather.structuredContent);
    });

    it('returns resource links and embedded resources the client can then read', async () => {
      const links = await call(client, 'get-resource-links', { count: 4 });
      expect(textOf(links)).toContain('Here are 4 resource links');
      const linked = links.content.filter((c) => c.type === 'resource_link') as { uri: string; name: string }[];
      expect(linked.map((l) => l.uri)).toEqual([
        'demo://resource/dynamic/blob/1',
        'demo://resource/dynamic/text/2',
        'demo://resource/dynamic/blob/3',
        'demo://resource/dynamic/text/4',
      ]);
      const read = await client.readResource({ uri: linked[1]!.uri });
      expect(read.contents[0]).toMatchObject({ uri: 'demo://resource/dynamic/text/2', mimeType: 'text/plain' });
      expect((read.contents[0] as { text: string }).text).toMatch(
        /^Resource 2: This is a plaintext resource created at/,
      );

      const reference = await call(client, 'get-resource-reference', { resourceType: 'Blob', resourceId: 7 });
      const embedded = reference.content.find((c) => c.type === 'resource') as {
        resource: { uri: string; blob: string };
      };
      expect(embedded.resource.uri).toBe('demo://resource/dynamic/blob/7');
      expect(Buffer.from(embedded.resource.blob, 'base64').toString()).toMatch(
        /^Resource 7: This is a base64 blob created at/,
      );
    });

    it('get-env shows the catalog entry environment and nothing of the control plane', async () => {
      const env = JSON.parse(textOf(await call(client, 'get-env'))) as Record<string, string>;
      expect(env.GREETING).toBe('hello from the catalog');
      expect(Object.keys(env).filter((k) => k.startsWith('AILERON') || k === 'DATABASE_URL')).toEqual([]);
    });

    it('gzip-file-as-resource compresses a data: URI into a session resource (a data: URI keeps the test off the network)', async () => {
      const original = 'Aileron pool: gzip me, '.repeat(50);
      const dataUri = `data:text/plain;base64,${Buffer.from(original).toString('base64')}`;
      const before = seen.listChanged;
      const asLink = await call(client, 'gzip-file-as-resource', {
        name: 'notes.txt.gz',
        data: dataUri,
        outputType: 'resourceLink',
      });
      expect(asLink.content).toEqual([
        {
          type: 'resource_link',
          uri: 'demo://resource/session/notes.txt.gz',
          name: 'notes.txt.gz',
          mimeType: 'application/gzip',
        },
      ]);
      // the new resource is announced, listed, and readable for the rest of the session
      await eventually('resources/list_changed', () => seen.listChanged > before);
      expect((await client.listResources()).resources.map((r) => r.uri)).toContain(
        'demo://resource/session/notes.txt.gz',
      );
      const read = await client.readResource({ uri: 'demo://resource/session/notes.txt.gz' });
      expect(gunzipSync(Buffer.from((read.contents[0] as { blob: string }).blob, 'base64')).toString()).toBe(original);

      const inline = await call(client, 'gzip-file-as-resource', {
        name: 'inline.gz',
        data: dataUri,
        outputType: 'resource',
      });
      const blob = (inline.content[0] as { resource: { blob: string; mimeType: string } }).resource;
      expect(blob.mimeType).toBe('application/gzip');
      expect(gunzipSync(Buffer.from(blob.blob, 'base64')).toString()).toBe(original);

      const refused = await call(client, 'gzip-file-as-resource', { data: 'file:///etc/passwd' });
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toContain('Unsupported URL protocol');
    });

    it('get-roots-list shows the roots the client gave, and follows roots/list_changed', async () => {
      const listed = textOf(await call(client, 'get-roots-list'));
      expect(listed).toContain('Current MCP Roots (1 total)');
      expect(listed).toContain('1. Project\n   URI: file:///home/ada/project');
      expect(seen.rootsRequests).toBeGreaterThan(0);

      const asked = seen.rootsRequests;
      roots.push({ uri: 'file:///home/ada/notes', name: 'Notes' });
      await client.sendRootsListChanged();
      await eventually('the server to ask for the roots again', () => seen.rootsRequests > asked);
      await eventually('the new root to show', () =>
        seen.logs.some((l) => String(l.data).includes('2 root(s) received')),
      );
      expect(textOf(await call(client, 'get-roots-list'))).toContain('2. Notes\n   URI: file:///home/ada/notes');
    });

    it('trigger-sampling-request returns what the client sampled', async () => {
      const result = await call(client, 'trigger-sampling-request', { prompt: 'Why is the sky blue?', maxTokens: 50 });
      expect(seen.sampling.at(-1)).toMatchObject({
        maxTokens: 50,
        systemPrompt: 'You are a helpful test server.',
        messages: [
          {
            role: 'user',
            content: { type: 'text', text: 'Resource trigger-sampling-request context: Why is the sky blue?' },
          },
        ],
      });
      expect(textOf(result)).toContain('LLM sampling result:');
      expect(JSON.parse(textOf(result).replace('LLM sampling result: \n', ''))).toEqual({
        role: 'assistant',
        content: { type: 'text', text: SAMPLED },
        model: 'test-model',
        stopReason: 'endTurn',
      });
    });

    it('trigger-elicitation-request returns what the client accepted', async () => {
      const result = await call(client, 'trigger-elicitation-request');
      expect(seen.elicitations.at(-1)).toMatchObject({
        message: 'Please provide inputs for the following fields:',
        requestedSchema: { required: ['name'] },
      });
      const text = textOf(result);
      expect(text).toContain('✅ User provided the requested information!');
      expect(text).toContain('- Name: Ada Lovelace');
      expect(text).toContain('- Agreed to terms: true');
      expect(text).toContain('- Email: ada@example.com');
      expect(text).toContain('- Favorite Integer: 42');
    });

    it('trigger-long-running-operation reports progress to the client and then answers', async () => {
      const progress: Progress[] = [];
      const result = await client.callTool(
        { name: 'trigger-long-running-operation', arguments: { duration: 2, steps: 4 } },
        undefined,
        { onprogress: (p) => progress.push(p) },
      );
      expect(textOf(result as CallToolResult)).toBe('Long running operation completed. Duration: 2 seconds, Steps: 4.');
      // the last notification may share a read with the answer, and the SDK client drops it then
      expect(progress.length).toBeGreaterThanOrEqual(3);
      expect(progress).toEqual(progress.map((_, i) => ({ progress: i + 1, total: 4 })));
    });

    it('simulated logging reaches the client, at the level it set', async () => {
      await client.setLoggingLevel('debug');
      const before = seen.logs.length;
      expect(textOf(await call(client, 'toggle-simulated-logging'))).toContain(
        'Started simulated, random-leveled logging',
      );
      await eventually('a simulated log message', () =>
        seen.logs.slice(before).some((l) => /level.message/.test(String(l.data))),
      );
      // the 5-second pace: a second message comes from the server on its own, not tied to any call
      await eventually(
        'a second simulated log message',
        () => seen.logs.slice(before).filter((l) => /level.message/.test(String(l.data))).length >= 2,
        { timeoutMs: 12_000 },
      );
      expect(textOf(await call(client, 'toggle-simulated-logging'))).toContain('Stopped simulated logging');

      // above every level the server sends, its own info lines stop as well
      await client.setLoggingLevel('emergency');
      const quiet = seen.logs.length;
      await client.subscribeResource({ uri: 'demo://resource/dynamic/text/9' });
      await client.unsubscribeResource({ uri: 'demo://resource/dynamic/text/9' });
      await client.setLoggingLevel('info');
      await client.subscribeResource({ uri: 'demo://resource/dynamic/text/9' });
      await client.unsubscribeResource({ uri: 'demo://resource/dynamic/text/9' });
      await eventually('the unsubscribe log line', () =>
        seen.logs.some((l) =>
          String(l.data).startsWith('Received Unsubscribe Resource request: demo://resource/dynamic/text/9'),
        ),
      );
      expect(seen.logs.slice(quiet).map((l) => l.level)).toEqual(['info', 'info']);
    }, 30_000);

    it('resource subscriptions deliver updates for subscribed URIs only', async () => {
      const first = 'demo://resource/dynamic/text/1';
      const second = 'demo://resource/dynamic/blob/2';
      await client.subscribeResource({ uri: first });
      expect(textOf(await call(client, 'toggle-subscriber-updates'))).toContain(
        'Started simulated resource updated notifications',
      );
      await eventually(`an update for ${first}`, () => seen.updated.includes(first));

      await client.unsubscribeResource({ uri: first });
      await client.subscribeResource({ uri: second });
      expect(textOf(await call(client, 'toggle-subscriber-updates'))).toContain('Stopped simulated resource updates');
      const firstCount = seen.updated.filter((u) => u === first).length;
      // turning updates on again sends one round at once: only the URI still subscribed
      await call(client, 'toggle-subscriber-updates');
      await eventually(`an update for ${second}`, () => seen.updated.includes(second));
      expect(seen.updated.filter((u) => u === first).length).toBe(firstCount);
      await call(client, 'toggle-subscriber-updates');
      await client.unsubscribeResource({ uri: second });
    });

    it('simulate-research-query runs as a task, asking the client to clarify when the topic is ambiguous', async () => {
      const plain = await collect(
        client.experimental.tasks.callToolStream(
          { name: 'simulate-research-query', arguments: { topic: 'gliders' } },
          undefined,
          { task: { ttl: 60_000 } },
        ),
      );
      expect(plain.map((m) => m.type)).toContain('taskCreated');
      expect(textOf(resultOf(plain))).toContain('# Research Report: gliders');

      const asked = seen.elicitations.length;
      const ambiguous = await collect(
        client.experimental.tasks.callToolStream(
          { name: 'simulate-research-query', arguments: { topic: 'python', ambiguous: true } },
          undefined,
          { task: { ttl: 60_000 } },
        ),
      );
      expect(seen.elicitations.slice(asked)[0]).toMatchObject({
        message: expect.stringContaining('"python" could have multiple interpretations'),
      });
      expect(textOf(resultOf(ambiguous))).toContain('# Research Report: python (snake)');
    }, 30_000);

    it('lists, reads and completes resources, templates and prompts; answers ping', async () => {
      const { resources } = await client.listResources();
      expect(resources).toContainEqual(
        expect.objectContaining({
          uri: 'demo://resource/static/document/features.md',
          name: 'features.md',
          mimeType: 'text/markdown',
        }),
      );
      const features = await client.readResource({ uri: 'demo://resource/static/document/features.md' });
      expect((features.contents[0] as { text: string }).text).toBe(
        readFileSync(resolve(EVERYTHING_DIST, 'docs/features.md'), 'utf8'),
      );

      const { resourceTemplates } = await client.listResourceTemplates();
      expect(resourceTemplates.map((t) => t.uriTemplate).sort()).toEqual([
        'demo://resource/dynamic/blob/{resourceId}',
        'demo://resource/dynamic/text/{resourceId}',
      ]);
      const dynamic = await client.readResource({ uri: 'demo://resource/dynamic/text/5' });
      expect((dynamic.contents[0] as { text: string }).text).toMatch(/^Resource 5: This is a plaintext resource/);
      await expect(client.readResource({ uri: 'demo://resource/dynamic/text/zero' })).rejects.toThrow(
        /Unknown resource|not found/i,
      );

      const { prompts } = await client.listPrompts();
      expect(prompts.map((p) => p.name).sort()).toEqual([
        'args-prompt',
        'completable-prompt',
        'resource-prompt',
        'simple-prompt',
      ]);
      const weather = await client.getPrompt({ name: 'args-prompt', arguments: { city: 'Paris', state: 'Texas' } });
      expect(weather.messages).toEqual([
        { role: 'user', content: { type: 'text', text: "What's weather in Paris, Texas?" } },
      ]);
      const embedded = await client.getPrompt({
        name: 'resource-prompt',
        arguments: { resourceType: 'Text', resourceId: '3' },
      });
      expect(embedded.messages[1]!.content).toMatchObject({
        type: 'resource',
        resource: { uri: 'demo://resource/dynamic/text/3' },
      });

      const departments = await client.complete({
        ref: { type: 'ref/prompt', name: 'completable-prompt' },
        argument: { name: 'department', value: 'S' },
      });
      expect(departments.completion.values.sort()).toEqual(['Sales', 'Support']);
      const people = await client.complete({
        ref: { type: 'ref/prompt', name: 'completable-prompt' },
        argument: { name: 'name', value: '' },
        context: { arguments: { department: 'Marketing' } },
      });
      expect(people.completion.values).toEqual(['Grace', 'Henry', 'Iris']);
      const ids = await client.complete({
        ref: { type: 'ref/resource', uri: 'demo://resource/dynamic/text/{resourceId}' },
        argument: { name: 'resourceId', value: '12' },
      });
      expect(ids.completion.values).toEqual(['12']);

      expect(await client.ping()).toEqual({});
    });

    it('a call the client aborts is cancelled, and the session keeps working', async () => {
      const controller = new AbortController();
      const progress: Progress[] = [];
      const errorsBefore = seen.errors.length;
      const running = client.callTool(
        { name: 'trigger-long-running-operation', arguments: { duration: 4, steps: 8 } },
        undefined,
        { signal: controller.signal, onprogress: (p) => progress.push(p) },
      );
      // abort once the server is visibly working on it
      await eventually('the first progress notification', () => progress.length > 0);
      controller.abort('the user pressed stop');
      await expect(running).rejects.toThrow(/the user pressed stop|abort/i);
      expect(textOf(await call(client, 'echo', { message: 'still here' }))).toBe('Echo: still here');
      // the server ran on for a while: none of its later progress may reach the client
      await new Promise((r) => setTimeout(r, 1500));
      expect(seen.errors.slice(errorsBefore)).toEqual([]);
    });

    it('a client whose stream broke mid-call resumes it with Last-Event-ID and gets the rest', async () => {
      const mcp = rawSession(cp, path);
      await mcp.initialize();
      const call = await mcp.post({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: {
          name: 'trigger-long-running-operation',
          arguments: { duration: 1.5, steps: 3 },
          _meta: { progressToken: 'resume-me' },
        },
      });
      const first = await call.next((e) => e.data.includes('notifications/progress'));
      expect(JSON.parse(first.data).params).toEqual({ progress: 1, total: 3, progressToken: 'resume-me' });
      await call.disconnect();

      // the call finishes while nobody listens; the client comes back for what it missed
      await new Promise((r) => setTimeout(r, 2000));
      const resumed = await mcp.get(first.id);
      const rest = [
        await resumed.next((e) => e.data !== ''),
        await resumed.next((e) => e.data !== ''),
        await resumed.next((e) => e.data !== ''),
      ].map((e) => JSON.parse(e.data));
      await resumed.disconnect();
      expect(rest.slice(0, 2).map((m) => m.params)).toEqual([
        { progress: 2, total: 3, progressToken: 'resume-me' },
        { progress: 3, total: 3, progressToken: 'resume-me' },
      ]);
      expect(rest[2]).toMatchObject({
        id: 7,
        result: {
          content: [{ type: 'text', text: 'Long running operation completed. Duration: 1.5 seconds, Steps: 3.' }],
        },
      });
      await mcp.terminate();
    });

    it('a session the client ends is gone: its id is refused afterwards', async () => {
      const mcp = rawSession(cp, path);
      await mcp.initialize();
      const ended = await mcp.terminate();
      expect(ended.status, await ended.text()).toBe(200);
      const after = await mcp.post({ jsonrpc: '2.0', id: 2, method: 'ping' });
      expect(after.status).toBe(404);
      await after.disconnect();
    });
  });

  describe(`server-everything for a client that runs sampling and elicitation as tasks and opens URLs (sessions: ${sessions})`, () => {
    let cp: TestControlPlane;
    let client: Client;
    let seen: Seen;

    shared.beforeAll(async ({ sharedControlPlane }) => {
      cp = await sharedControlPlane('pglite');
      const ws = await aWorkspace(cp, cp.ownerToken);
      await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, { body: { default: 'allow', rules: [] } });
      const server = await aRemoteServer(
        cp,
        cp.ownerToken,
        ws.slug,
        { ...SERVERS.everything, sessions },
        uniqueSlug('everything'),
      );
      ({ client, seen } = await open(
        cp,
        `/mcp/${ws.slug}/${server}`,
        {
          sampling: {},
          elicitation: { form: {}, url: {} },
          roots: {},
          tasks: { requests: { sampling: { createMessage: {} }, elicitation: { create: {} } } },
        },
        true,
      ));
    });
    afterAll(async () => {
      await client?.close();
    });

    it('lists every tool of server-everything', async () => {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(
        [...BASE_TOOLS, ...CAPABILITY_TOOLS, ...TASK_AND_URL_TOOLS].sort(),
      );
    });

    it('trigger-sampling-request-async: the client samples as a task and the server polls it to completion', async () => {
      const text = textOf(
        await call(client, 'trigger-sampling-request-async', { prompt: 'Name a glider', maxTokens: 20 }),
      );
      expect(seen.sampling.at(-1)).toMatchObject({ task: { ttl: 300000 }, maxTokens: 20 });
      expect(text).toContain('[COMPLETED] Async sampling completed!');
      expect(text).toMatch(/Task created: \w+/);
      expect(text).toContain(SAMPLED);
    }, 30_000);

    it('trigger-elicitation-request-async: the client answers the form as a task', async () => {
      const text = textOf(await call(client, 'trigger-elicitation-request-async'));
      expect(seen.elicitations.at(-1)).toMatchObject({
        task: { ttl: 600000 },
        requestedSchema: { required: ['name'] },
      });
      expect(text).toContain('[COMPLETED] User provided the requested information!');
      expect(text).toContain('- Name: Ada Lovelace');
      expect(text).toContain('- Favorite Color: Blue');
      expect(text).toContain('- Agreed to terms: true');
    }, 30_000);

    it('trigger-url-elicitation: the client is sent to the URL, or told by error -32042 that it must go there first', async () => {
      const url = 'https://example.com/authorize?state=abc';
      const asked = await call(client, 'trigger-url-elicitation', { url, elicitationId: 'el-1' });
      expect(seen.elicitations.at(-1)).toEqual({
        mode: 'url',
        url,
        message: 'Please open the link to complete this action.',
        elicitationId: 'el-1',
      });
      expect(textOf(asked)).toContain('✅ User completed the URL elicitation flow.\nElicitation ID: el-1');

      const required = await call(client, 'trigger-url-elicitation', { url, errorPath: true }).then(
        () => null,
        (error: unknown) => error,
      );
      expect(required).toBeInstanceOf(McpError);
      expect((required as McpError).code).toBe(ErrorCode.UrlElicitationRequired);
      // the server's SDK already puts one prefix on the wire and the client's adds one: a proxy that re-wrapped would add a third
      expect((required as McpError).message).toBe(
        'MCP error -32042: MCP error -32042: This request requires browser-based authorization.',
      );
      expect((required as McpError).data).toMatchObject({
        elicitations: [{ mode: 'url', url: 'https://modelcontextprotocol.io' }],
      });
      // once the prerequisite is done, the same call goes through
      expect(textOf(await call(client, 'trigger-url-elicitation', { url, errorPath: true }))).toContain(
        '✅ User completed the URL elicitation flow.',
      );
    });
  });
}
