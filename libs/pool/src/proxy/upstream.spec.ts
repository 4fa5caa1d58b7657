import { createServer, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Clock } from '@aileron/clock';
import type { InstanceExit } from '../drivers/driver';
import { Instance } from '../pool-instances.service';
import { UPSTREAM_GONE } from './jsonrpc';
import { Upstream } from './upstream';

/** An instance whose answers to tools/call are event streams written by each test. */
describe('Upstream (a session on one instance)', () => {
  let server: Server;
  let url: string;
  let answer: (id: string) => string = () => '';

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        const message = JSON.parse(body) as { id?: string };
        if (message.id === undefined) {
          res.writeHead(202).end();
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream', 'mcp-session-id': 'upstream-1' });
        res.end(answer(message.id));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });
  afterAll(() => {
    server.closeAllConnections();
    server.close();
  });

  function anInstance(ended: Promise<InstanceExit> = new Promise(() => undefined)): Instance {
    return new Instance('i-1', 'srv', '1.0.0', { url, headers: {} }, ended, null, () => undefined, 8, new Clock());
  }

  async function session(): Promise<{ upstream: Upstream; heard: { method: string; on: unknown }[] }> {
    const instance = new Instance(
      'i-1',
      'srv',
      '1.0.0',
      { url, headers: {} },
      new Promise(() => undefined),
      null,
      () => undefined,
      8,
      new Clock(),
    );
    const upstream = new Upstream('srv', instance);
    const heard: { method: string; on: unknown }[] = [];
    upstream.onServerMessage = (message, on) => heard.push({ method: message.method, on });
    await upstream.start();
    return { upstream, heard };
  }

  it('reads the answer off the event stream, drops what is not JSON-RPC, and ties what the server sends on it to the call', async () => {
    answer = (id) =>
      [
        'event: message\ndata: not json\n\n',
        // a result must be an object: dropped, as the SDK would
        `event: message\ndata: {"jsonrpc":"2.0","id":"${id}","result":"nope"}\n\n`,
        // a priming event carries no data
        'id: p-1\ndata: \n\n',
        'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}\n\n',
        `event: message\ndata: {"jsonrpc":"2.0","id":"${id}","result":{"content":[{"type":"text","text":"done ✓"}]}}\n\n`,
      ].join('');
    const { upstream, heard } = await session();
    const call = { tag: 'the client call' };
    const result = await upstream.request('tools/call', { name: 'work', arguments: {} }, undefined, call);
    expect(result).toEqual({ result: { content: [{ type: 'text', text: 'done ✓' }] } });
    expect(heard).toEqual([{ method: 'notifications/message', on: call }]);
    await upstream.close();
  });

  it('answers a call whose stream ends without its answer with a clear error, at once', async () => {
    answer = () =>
      'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"bye"}}\n\n';
    const { upstream } = await session();
    const started = Date.now();
    const result = await upstream.request('tools/call', { name: 'work', arguments: {} });
    expect(result).toEqual({
      error: { code: UPSTREAM_GONE, message: 'the server ended the response without answering' },
    });
    expect(Date.now() - started).toBeLessThan(5_000);
    await upstream.close();
  });

  it('is let go once closed, though its instance lives on: an instance serving for days does not keep every session it served', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const instance = anInstance();
    const openAndClose = async (): Promise<WeakRef<Upstream>> => {
      const upstream = new Upstream('srv', instance);
      await upstream.start();
      await upstream.close();
      return new WeakRef(upstream);
    };
    const closed: WeakRef<Upstream>[] = [];
    for (let i = 0; i < 20; i++) closed.push(await openAndClose());
    // what the transports' closing scheduled runs on later turns: collect until nothing is held (a leak fails the poll)
    await expect
      .poll(() => {
        gc();
        return closed.filter((ref) => ref.deref() !== undefined).length;
      })
      .toBe(0);
    expect(instance.upstreamSessions).toBe(0);
  });

  it('still ends a session that is open when its instance ends, and one opened after it ended', async () => {
    let end!: (exit: InstanceExit) => void;
    const instance = anInstance(new Promise((resolve) => (end = resolve)));
    const open = new Upstream('srv', instance);
    await open.start();
    end({ reason: 'killed', requested: false });
    await new Promise((resolve) => setImmediate(resolve));
    expect(open.alive).toBe(false);
    expect(await open.request('tools/call', { name: 'work', arguments: {} })).toEqual({
      error: { code: UPSTREAM_GONE, message: 'the server instance stopped (killed)' },
    });
    const late = new Upstream('srv', instance);
    await new Promise((resolve) => setImmediate(resolve));
    expect(late.alive).toBe(false);
  });
});
