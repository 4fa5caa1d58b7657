import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { announcedExecution, AuditService, executionRecord } from '../../libs/audit/src';
import { SystemScopes } from '../../libs/auth/src/scope-issuer';
import { DatabaseService, type Transaction } from '../../libs/platform/database/src';
import { OutboxConsumer, OutboxRepository, OutboxService } from '../../libs/platform/outbox/src';
import { anOrganization, aWorkspace } from '../support/builders';
import { aReplicaOf, startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { BACKENDS } from '../support/databases';
import { eventually } from '../support/eventually';

/** A consumer whose effect is a row written in its delivery transaction. */
function recordingConsumer(name: string, options: { failFirst?: Set<string> } = {}): OutboxConsumer {
  return {
    name,
    topics: ['test.happened'],
    async handle(message, tx) {
      await tx.$executeRaw`INSERT INTO test_effects (message_id, consumer) VALUES (${message.id}, ${name})`;
      if (options.failFirst?.delete(message.id)) throw new Error('consumer crashed mid-way');
    },
  };
}

describe.each(BACKENDS)('transactional outbox on %s', (backend) => {
  let cp: TestControlPlane;
  let outbox: OutboxService;

  async function effects(): Promise<{ message_id: string; consumer: string }[]> {
    return cp.cp.database.client
      .$queryRaw`SELECT message_id, consumer FROM test_effects ORDER BY message_id::bigint, consumer`;
  }

  async function recordDirectly(count: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const rows = await cp.cp.database.client.$queryRaw<{ id: bigint }[]>`
        INSERT INTO outbox_messages (topic, payload) VALUES ('test.happened', ${JSON.stringify({ i })}::jsonb) RETURNING id`;
      ids.push(rows[0]!.id.toString());
    }
    return ids;
  }

  /** Many messages in one commit, as a burst of activity leaves them: the dispatcher claims them together. */
  async function recordTogether(count: number, topic = 'test.happened'): Promise<string[]> {
    const rows = await cp.cp.database.client.$queryRaw<{ id: bigint }[]>`
      INSERT INTO outbox_messages (topic, payload) SELECT ${topic}, jsonb_build_object('i', i) FROM generate_series(1, ${count}) AS i RETURNING id`;
    return rows.map((r) => r.id.toString());
  }

  beforeAll(async () => {
    cp = await startTestControlPlane(backend);
    await cp.cp.database.client.$executeRawUnsafe(
      'CREATE TABLE test_effects (message_id text NOT NULL, consumer text NOT NULL)',
    );
    outbox = cp.cp.app.get(OutboxService);
    outbox.addConsumer(recordingConsumer('alpha'));
    outbox.addConsumer(recordingConsumer('beta'));
  });
  afterAll(async () => cp?.close());

  it('delivers what was recorded before anyone dispatched it (a crash after commit) once to each consumer', async () => {
    const ids = await recordDirectly(40);
    await eventually(
      'deliveries',
      async () => (await effects()).filter((e) => ids.includes(e.message_id)).length >= 80,
    );
    const mine = (await effects()).filter((e) => ids.includes(e.message_id));
    expect(mine).toHaveLength(80);
    expect(new Set(mine.map((e) => `${e.message_id}/${e.consumer}`)).size).toBe(80);
    await eventually(
      'completion',
      async () =>
        (await cp.cp.database.client.outboxMessage.count({
          where: { id: { in: ids.map(BigInt) }, completedAt: null },
        })) === 0,
    );
  });

  it('a re-dispatch after a lost lease (a dispatcher that died) delivers nothing twice', async () => {
    const ids = await recordDirectly(10);
    await eventually(
      'deliveries',
      async () => (await effects()).filter((e) => ids.includes(e.message_id)).length >= 20,
    );
    // as if the dispatcher died before marking completion: lease expired, not completed
    await cp.cp.database.client.outboxMessage.updateMany({
      where: { id: { in: ids.map(BigInt) } },
      data: { completedAt: null, dispatchedAt: new Date(Date.now() - 3600_000) },
    });
    await outbox.sweep();
    await eventually(
      'completion',
      async () =>
        (await cp.cp.database.client.outboxMessage.count({
          where: { id: { in: ids.map(BigInt) }, completedAt: null },
        })) === 0,
    );
    const mine = (await effects()).filter((e) => ids.includes(e.message_id));
    expect(mine).toHaveLength(20);
  });

  it('a consumer that fails part-way is retried, and its half-done effect was rolled back', async () => {
    const [id] = await recordDirectly(1);
    const flaky = recordingConsumer('gamma', { failFirst: new Set([id!]) });
    outbox.addConsumer({ ...flaky, name: 'gamma' });
    await eventually('gamma delivery', async () =>
      (await effects()).some((e) => e.message_id === id && e.consumer === 'gamma'),
    );
    const gamma = (await effects()).filter((e) => e.message_id === id && e.consumer === 'gamma');
    expect(gamma).toHaveLength(1);
  });

  it('a burst is handed over in batches, and a message its consumer cannot handle does not hold back the rest', async () => {
    const ids = await recordTogether(30, 'burst.happened');
    const poison = ids[7]!;
    const batches: string[][] = [];
    const seen: string[] = [];
    outbox.addConsumer({
      name: `burst-${backend}`,
      topics: ['burst.happened'],
      handle: async () => {
        throw new Error('handleMany is used when a consumer has it');
      },
      async handleMany(messages, tx) {
        batches.push(messages.map((m) => m.id));
        for (const message of messages) {
          if (message.id === poison) throw new Error('this one message cannot be handled');
          await tx.$executeRaw`INSERT INTO test_effects (message_id, consumer) VALUES (${message.id}, 'burst')`;
        }
        seen.push(...messages.map((m) => m.id));
      },
    });
    await outbox.sweep();
    const others = ids.filter((id) => id !== poison);
    await eventually(
      'the rest of the burst',
      async () => (await effects()).filter((e) => e.consumer === 'burst').length >= others.length,
    );
    // the first try carried several messages in one call, in id order
    expect(batches[0]!.length).toBeGreaterThan(1);
    expect(batches[0]).toEqual([...batches[0]!].sort((a, b) => Number(a) - Number(b)));
    const effected = (await effects()).filter((e) => e.consumer === 'burst').map((e) => e.message_id);
    // each handled once (the failed batch's effects were rolled back), the poison never
    expect(effected.sort()).toEqual([...others].sort());
    expect(new Set(seen).size).toBe(seen.length);
    const open = async () =>
      (
        await cp.cp.database.client.outboxMessage.findMany({
          where: { id: { in: ids.map(BigInt) }, completedAt: null },
          select: { id: true },
        })
      ).map((m) => m.id.toString());
    await eventually('completion of all but the poison', async () => (await open()).length === 1);
    expect(await open()).toEqual([poison]);
  });

  it('a live feed hears each message once, on its first dispatch, and completion never waits for it', async () => {
    const heard: string[] = [];
    outbox.addConsumer({
      name: `live-${backend}`,
      topics: ['live.happened', 'only-live.happened'],
      transient: true,
      hear: async (messages) => void heard.push(...messages.map((m) => m.id)),
    });
    let down = true;
    outbox.addConsumer({
      name: `durable-${backend}`,
      topics: ['live.happened'],
      handle: async () => {
        if (down) throw new Error('the webhook receiver is down');
      },
    });
    const ids = await recordTogether(5, 'live.happened');
    await outbox.sweep();
    await eventually('the live feed', async () => ids.every((id) => heard.includes(id)));
    const db = cp.cp.database.client;
    const marks = await db.outboxDelivery.count({
      where: { messageId: { in: ids.map(BigInt) }, consumer: `live-${backend}` },
    });
    expect(marks).toBe(0);
    // the durable consumer failed; its messages are dispatched again (a lost lease) and then delivered
    expect(await db.outboxMessage.count({ where: { id: { in: ids.map(BigInt) }, completedAt: null } })).toBe(
      ids.length,
    );
    down = false;
    await db.outboxMessage.updateMany({
      where: { id: { in: ids.map(BigInt) } },
      data: { dispatchedAt: new Date(Date.now() - 3600_000) },
    });
    await outbox.sweep();
    await eventually(
      'completion',
      async () => (await db.outboxMessage.count({ where: { id: { in: ids.map(BigInt) }, completedAt: null } })) === 0,
    );
    // heard once each: the re-dispatch went to the durable consumer only
    expect([...heard].filter((id) => ids.includes(id)).sort()).toEqual([...ids].sort());

    // a message only the live feed wants is done as soon as it is handed over
    const [solo] = await recordTogether(1, 'only-live.happened');
    await outbox.sweep();
    await eventually('the live-only message', async () => heard.includes(solo!));
    await eventually(
      'its completion',
      async () => (await db.outboxMessage.count({ where: { id: BigInt(solo!), completedAt: null } })) === 0,
    );
  });

  it('a topic with one durable consumer is completed by its delivery: no marks, once each even when delivered twice at once', async () => {
    // besides the live feed, webhooks are the only consumer of this topic, as of every event the product records
    const ids = await recordTogether(25, 'solo.happened');
    await outbox.sweep();
    const db = cp.cp.database.client;
    await eventually(
      'completion',
      async () => (await db.outboxMessage.count({ where: { id: { in: ids.map(BigInt) }, completedAt: null } })) === 0,
    );
    expect(await db.outboxDelivery.count({ where: { messageId: { in: ids.map(BigInt) } } })).toBe(0);

    // two dispatchers handing over the same messages at the same moment (a lease lost while the first still ran)
    const repository = cp.cp.app.get(OutboxRepository);
    // leased as they are written, so this process's own dispatcher leaves them to the two below
    const rows = await db.$queryRaw<{ id: bigint }[]>`
      INSERT INTO outbox_messages (topic, payload, dispatched_at, dispatch_count)
      SELECT 'solo.happened', jsonb_build_object('i', i), now(), 1 FROM generate_series(1, 10) AS i RETURNING id`;
    const again = rows.map((r) => r.id.toString());
    const effect = (name: string) => async (messages: { id: string }[], tx: Transaction) => {
      for (const m of messages)
        await tx.$executeRaw`INSERT INTO test_effects (message_id, consumer) VALUES (${m.id}, ${name})`;
    };
    const handled = await Promise.all([
      repository.deliverAndComplete(again, effect('solo')),
      repository.deliverAndComplete(again, effect('solo')),
    ]);
    expect(handled.reduce((a, b) => a + b, 0)).toBe(again.length);
    const solo = (await effects()).filter((e) => e.consumer === 'solo').map((e) => e.message_id);
    expect(solo.sort()).toEqual([...again].sort());
    expect(await db.outboxMessage.count({ where: { id: { in: again.map(BigInt) }, completedAt: null } })).toBe(0);
  });

  it('what a change records is leased to its writer and handed over at commit, without a claim', async () => {
    const heard: string[] = [];
    const live: { id: string; n: unknown; createdAt: number }[] = [];
    outbox.addConsumer({
      name: `handover-${backend}`,
      topics: ['handover.happened'],
      handle: async (m) => void heard.push(String(m.payload.n)),
    });
    outbox.addConsumer({
      name: `handover-live-${backend}`,
      topics: ['handover.happened'],
      transient: true,
      hear: async (messages) =>
        void live.push(...messages.map((m) => ({ id: m.id, n: m.payload.n, createdAt: m.createdAt.getTime() }))),
    });
    const db = cp.cp.app.get(DatabaseService);
    const rows = async () =>
      cp.cp.database.client.$queryRaw<
        { id: bigint; n: number; created_at: Date; dispatch_count: number; leased: boolean; done: boolean }[]
      >`
        SELECT id, (payload->>'n')::int AS n, created_at, dispatch_count, dispatched_at IS NOT NULL AS leased, completed_at IS NOT NULL AS done
        FROM outbox_messages WHERE topic = 'handover.happened' ORDER BY id`;
    const payloads = [3, 1, 4, 1, 5, 9, 2, 6].map((n) => ({
      topic: 'handover.happened',
      payload: { n },
      audited: false,
    }));
    await db.transaction((tx) => outbox.record(tx, ...payloads));
    // leased in the same statement that wrote them: no sweep can take them while their writer hands them over
    expect((await rows()).every((r) => r.leased && Number(r.dispatch_count) === 1)).toBe(true);
    await eventually(
      'the hand-over',
      async () =>
        heard.length === payloads.length && live.length === payloads.length && (await rows()).every((r) => r.done),
    );
    expect(heard).toHaveLength(payloads.length);
    // the live feed heard them from memory, each with its own row's id and time
    const written = await rows();
    expect(live).toEqual(written.map((r) => ({ id: r.id.toString(), n: r.n, createdAt: r.created_at.getTime() })));
    // dispatched once each: never claimed again
    expect(written.map((r) => Number(r.dispatch_count))).toEqual(payloads.map(() => 1));
  });

  describe('a topic whose one durable consumer runs inline (webhooks, as for every event the product records)', () => {
    let changes = 0;

    async function rowsOf(topic: string) {
      return cp.cp.database.client.$queryRaw<{ id: bigint; n: number; dispatch_count: number; done: boolean }[]>`
        SELECT id, (payload->>'n')::int AS n, dispatch_count, completed_at IS NOT NULL AS done
        FROM outbox_messages WHERE topic = ${topic} ORDER BY id`;
    }

    /** Records `ns` as messages of `topic` with a change of its own (an effect row) in one transaction. */
    async function aChangeRecording(topic: string, ns: number[], organizationId?: string): Promise<string> {
      // an id no message has (effects() reads them as numbers)
      const change = String(-++changes);
      await cp.cp.app.get(DatabaseService).transaction(async (tx) => {
        await tx.$executeRaw`INSERT INTO test_effects (message_id, consumer) VALUES (${change}, 'the change')`;
        await outbox.record(tx, ...ns.map((n) => ({ topic, organizationId, payload: { n }, audited: false })));
      });
      return change;
    }

    function aLiveFeed(topic: string): { id: string; n: unknown }[] {
      const heard: { id: string; n: unknown }[] = [];
      outbox.addConsumer({
        name: `live-${topic}-${backend}`,
        topics: [topic],
        transient: true,
        hear: async (messages) => void heard.push(...messages.map((m) => ({ id: m.id, n: m.payload.n }))),
      });
      return heard;
    }

    it('is handled in the writing transaction: its messages commit completed with the change, and the live feed still hears each once', async () => {
      const topic = 'inline.happened';
      const heard = aLiveFeed(topic);
      const change = await aChangeRecording(topic, [2, 7, 1, 8]);
      // complete when the transaction returns: no hand-over, job or later completion
      const rows = await rowsOf(topic);
      expect(rows.map((r) => [r.n, r.done, Number(r.dispatch_count)])).toEqual([
        [2, true, 1],
        [7, true, 1],
        [1, true, 1],
        [8, true, 1],
      ]);
      expect((await effects()).filter((e) => e.message_id === change)).toHaveLength(1);
      expect(
        await cp.cp.database.client.outboxDelivery.count({ where: { messageId: { in: rows.map((r) => r.id) } } }),
      ).toBe(0);
      await eventually('the live feed', async () => heard.length === rows.length);
      expect(heard).toEqual(rows.map((r) => ({ id: r.id.toString(), n: r.n })));
    });

    it('that fails there leaves the change whole: its messages go the usual way and are handled once', async () => {
      const topic = 'inline.faulty';
      const db = cp.cp.database.client;
      // a fault in the inline attempt alone (the first write of completed rows of this topic), from the database itself
      await db.$executeRawUnsafe(`CREATE SEQUENCE inline_faults`);
      await db.$executeRawUnsafe(`
        CREATE FUNCTION inline_fault() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.topic = '${topic}' AND NEW.completed_at IS NOT NULL AND nextval('inline_faults') = 1 THEN
            RAISE EXCEPTION 'inline attempt refused';
          END IF;
          RETURN NEW;
        END $$`);
      await db.$executeRawUnsafe(
        `CREATE TRIGGER inline_fault BEFORE INSERT ON outbox_messages FOR EACH ROW EXECUTE FUNCTION inline_fault()`,
      );
      try {
        // an organisation with an endpoint (for other events, never called): the consumer has work, and runs inline
        const org = await anOrganization(cp);
        const hook = await cp.request('POST', '/v1/webhooks', {
          token: org.token,
          body: { name: 'elsewhere', url: 'https://93.184.216.34/hook', events: ['nothing.*'] },
        });
        expect(hook.status, hook.text).toBe(201);
        const heard = aLiveFeed(topic);
        const change = await aChangeRecording(topic, [3, 1, 4], org.id);
        expect((await effects()).filter((e) => e.message_id === change)).toHaveLength(1);
        await eventually('their completion the usual way', async () => {
          const rows = await rowsOf(topic);
          return rows.length === 3 && rows.every((r) => r.done);
        });
        const rows = await rowsOf(topic);
        // written once (the refused attempt was rolled back), leased to this process and handed over
        expect(rows.map((r) => [r.n, Number(r.dispatch_count)])).toEqual([
          [3, 1],
          [1, 1],
          [4, 1],
        ]);
        await eventually('the live feed', async () => heard.length === rows.length);
        expect(heard).toEqual(rows.map((r) => ({ id: r.id.toString(), n: r.n })));
      } finally {
        await db.$executeRawUnsafe(`DROP TRIGGER inline_fault ON outbox_messages`);
        await db.$executeRawUnsafe(`DROP FUNCTION inline_fault()`);
        await db.$executeRawUnsafe(`DROP SEQUENCE inline_faults`);
      }
    });
  });

  it('an event stored as a reference to its audit record reaches a durable consumer and a reader of the table whole', async () => {
    const topic = `announced.${backend}`;
    const payloads: Record<string, unknown>[] = [];
    // a durable consumer besides webhooks: the messages go out after commit and are read back from the table
    outbox.addConsumer({
      name: `announced-${backend}`,
      topics: [topic],
      handle: async (message) => void payloads.push(message.payload),
    });
    const ws = await aWorkspace(cp, cp.ownerToken);
    const me = await cp.request('GET', '/v1/me');
    const scope = SystemScopes.workspace(me.body.organization.id as string, ws);
    const recordId = '7c9e6679-7425-40de-944b-e07fc1f90ae7';
    const record = executionRecord({
      type: 'execution.succeeded',
      execution_mode: 'remote',
      server: 'github',
      tool: 'get_issue',
      decision: 'allow',
      principal: 'user:u-1',
      session: 'sess-1',
      data: { execution_id: 'x-1', latency_ms: 2.5, result_bytes: 64 },
    });
    const announced = announcedExecution(
      { topic, organizationId: scope.organizationId, workspaceId: ws.id, audited: false },
      record,
      { workspace: ws.slug, actor: 'user:u-1', occurredAt: new Date('2030-01-01T00:00:00.123Z') },
      recordId,
    );
    await cp.cp.app.get(DatabaseService).transaction(async (tx) => {
      await cp.cp.app.get(AuditService).recordNew(
        tx,
        scope,
        [
          {
            id: recordId,
            type: record.type,
            occurredAt: new Date('2030-01-01T00:00:00.123Z'),
            source: 'pool',
            actor: 'user:u-1',
            principal: record.principal,
            executionMode: record.execution_mode,
            server: record.server,
            tool: record.tool,
            decision: record.decision,
            sessionId: record.session,
            data: record.data,
          },
        ],
        { replay: false },
      );
      await outbox.record(tx, announced);
    });
    await eventually('the durable consumer', async () => payloads.length === 1);
    expect(payloads).toEqual([announced.payload]);
    const [row] = await cp.cp.database.client.$queryRaw<{ id: bigint }[]>`
      SELECT id FROM outbox_messages WHERE topic = ${topic}`;
    expect((await outbox.read([row!.id.toString()])).map((m) => m.payload)).toEqual([announced.payload]);
  });

  it('a change and its event commit together: workspace.created reaches consumers', async () => {
    const seen: string[] = [];
    outbox.addConsumer({
      name: `watch-${backend}`,
      topics: ['workspace.created'],
      handle: async (m) => void seen.push(String(m.payload.workspace)),
    });
    const ws = await aWorkspace(cp, cp.ownerToken);
    await eventually('workspace.created', async () => seen.includes(ws.slug));
    expect(seen.filter((s) => s === ws.slug)).toHaveLength(1);
  });

  if (backend === 'postgres') {
    it('two replicas sweeping the same database deliver each message once per consumer', async () => {
      const second = await aReplicaOf(cp);
      try {
        const twin = second.cp.app.get(OutboxService);
        twin.addConsumer(recordingConsumer('alpha'));
        twin.addConsumer(recordingConsumer('beta'));
        const ids = await recordDirectly(60);
        await Promise.all([outbox.sweep(), twin.sweep(), outbox.sweep(), twin.sweep()]);
        // the first replica also has the consumer "gamma" from an earlier test; count the shared two
        const shared = async () =>
          (await effects()).filter((e) => ids.includes(e.message_id) && ['alpha', 'beta'].includes(e.consumer));
        await eventually('deliveries', async () => (await shared()).length >= 120);
        // a second delivery would be a transaction running beside the first: give one a moment to commit
        await new Promise((r) => setTimeout(r, 500));
        expect(await shared()).toHaveLength(120);
      } finally {
        await second.close();
      }
    });

    // the last test of the file: the first replica stops dispatching, as a worker process does not dispatch
    it('what a process that does not dispatch records is swept at once by one that does, told on the bus', async () => {
      // its ticks ten minutes apart: only the bus can bring its sweep forward within the test
      const dispatcher = await aReplicaOf(cp, { AILERON_OUTBOX_POLL_MS: '600000' });
      try {
        const other = dispatcher.cp.app.get(OutboxService);
        other.addConsumer(recordingConsumer('alpha'));
        other.addConsumer(recordingConsumer('beta'));
        await outbox.onApplicationShutdown();
        const recorded = await cp.cp.app
          .get(DatabaseService)
          .transaction((tx: Transaction) =>
            outbox.record(tx, { topic: 'test.happened', payload: { from: 'worker' }, audited: false }),
          );
        expect(recorded).toBeUndefined();
        const mine = async () =>
          (
            await cp.cp.database.client.$queryRaw<{ n: bigint }[]>`
              SELECT count(*) AS n FROM test_effects e JOIN outbox_messages m ON m.id::text = e.message_id
               WHERE m.payload->>'from' = 'worker' AND e.consumer IN ('alpha', 'beta')`
          )[0]!.n;
        await eventually('the worker-written message delivered to both consumers', async () => (await mine()) === 2n);
      } finally {
        await dispatcher.close();
      }
    });
  }
});
