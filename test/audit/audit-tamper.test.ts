import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AuditService,
  ChainedRecord,
  chainRecords,
  checkpointSigningInput,
  GENESIS_HASH,
  recordHash,
} from '@aileron/audit';
import { publicKeyFromX, verifyEd25519 } from '@aileron/crypto';
import { SigningKeysService } from '@aileron/keys';
import { aGateway, anOrganization, aWorkspace } from '../support/builders';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { Backend, BACKENDS } from '../support/databases';

/**
 * The hash chain against someone who can write to the database directly: an
 * operator with the superuser password, or anyone holding the PGlite data
 * directory. They can switch the append-only trigger off; what they cannot do
 * is change the log without `GET …/audit/verify` naming the first record that
 * is no longer what was written.
 */

interface Statement {
  sql: string;
  params?: unknown[];
}

/** Direct database access, beside the running control plane. */
interface Superuser {
  /** One transaction; with `bypass`, this session's triggers are off (`session_replication_role = replica`), as a superuser may do. */
  run(statements: Statement[], options?: { bypass?: boolean }): Promise<void>;
  query(sql: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}

async function superuserOf(cp: TestControlPlane): Promise<Superuser> {
  const database = cp.cp.config.database;
  if (database.kind === 'postgres') {
    // a connection of its own, as the postgres superuser, to the control plane's database
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    return {
      async run(statements, options = {}) {
        await client.query('BEGIN');
        try {
          if (options.bypass) await client.query('SET LOCAL session_replication_role = replica');
          for (const s of statements) await client.query(s.sql, s.params);
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK');
          throw error;
        }
      },
      async query(sql, params) {
        return (await client.query(sql, params)).rows as Record<string, unknown>[];
      },
      close: () => client.end(),
    };
  }
  // PGlite has one connection, the control plane's own: go through it, as someone with the data directory would
  const prisma = cp.cp.database.client;
  return {
    async run(statements, options = {}) {
      await prisma.$transaction(async (tx) => {
        if (options.bypass) await tx.$executeRawUnsafe('SET LOCAL session_replication_role = replica');
        for (const s of statements) await tx.$executeRawUnsafe(s.sql, ...(s.params ?? []));
      });
    },
    query: (sql, params = []) => prisma.$queryRawUnsafe(sql, ...params),
    async close() {},
  };
}

const COLUMNS =
  'organization_id, chain_id, workspace_id, seq, id, type, recorded_at, occurred_at, source, actor, principal, execution_mode, server, tool, decision, session_id, data, prev_hash, hash';
const VALUES =
  '$1::uuid, $2::uuid, $3::uuid, $4::bigint, $5::uuid, $6, $7::timestamptz, $8::timestamptz, $9, $10, $11, $12, $13, $14, $15, $16, $17::jsonb, $18, $19';

function valuesOf(r: ChainedRecord): unknown[] {
  return [
    r.organizationId,
    r.chainId,
    r.workspaceId,
    r.seq,
    r.id,
    r.type,
    r.recordedAt.toISOString(),
    r.occurredAt.toISOString(),
    r.source,
    r.actor,
    r.principal,
    r.executionMode,
    r.server,
    r.tool,
    r.decision,
    r.sessionId,
    JSON.stringify(r.data),
    r.prevHash,
    r.hash,
  ];
}

function toRecord(row: Record<string, unknown>): ChainedRecord {
  const text = (v: unknown) => (v === null || v === undefined ? null : String(v));
  return {
    chainId: String(row.chain_id),
    organizationId: String(row.organization_id),
    workspaceId: text(row.workspace_id),
    seq: Number(row.seq),
    id: String(row.id),
    type: String(row.type),
    recordedAt: new Date(row.recorded_at as string | Date),
    occurredAt: new Date(row.occurred_at as string | Date),
    source: row.source as ChainedRecord['source'],
    actor: text(row.actor),
    principal: text(row.principal),
    executionMode: text(row.execution_mode),
    server: text(row.server),
    tool: text(row.tool),
    decision: text(row.decision),
    sessionId: text(row.session_id),
    data: (typeof row.data === 'string' ? JSON.parse(row.data) : row.data) as Record<string, unknown>,
    prevHash: String(row.prev_hash),
    hash: String(row.hash),
  };
}

/** What a forger who knows the algorithm does: re-hash every record from `from` on so each links to the one before. */
function relinked(records: ChainedRecord[], from: number): ChainedRecord[] {
  let prev = from === 1 ? GENESIS_HASH : records.find((r) => r.seq === from - 1)!.hash;
  return records
    .filter((r) => r.seq >= from)
    .map((record) => {
      const { hash: _old, ...rest } = { ...record, prevHash: prev };
      prev = recordHash(rest);
      return { ...rest, hash: prev };
    });
}

function gatewayEvent(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: randomUUID(),
    type: 'execution.succeeded',
    time: new Date(Date.now() - 5_000).toISOString(),
    execution_mode: 'local',
    principal: 'user:alice@example.com',
    server: 'github',
    tool: 'get_issue',
    decision: 'allow',
    session: 'sess-1',
    latency_ms: 12,
    arguments: { repo: 'acme/api', issue: 7 },
    ...overrides,
  };
}

describe.each(BACKENDS)('the audit chain against direct database writes on %s', (backend: Backend) => {
  let cp: TestControlPlane;
  let su: Superuser;
  beforeAll(async () => {
    cp = await startTestControlPlane(backend);
    su = await superuserOf(cp);
  });
  afterAll(async () => {
    await su?.close();
    await cp?.close();
  });

  const rows = async (chainId: string): Promise<ChainedRecord[]> =>
    (await su.query('SELECT * FROM audit_events WHERE chain_id = $1::uuid ORDER BY seq', [chainId])).map(toRecord);

  const verify = async (ws: string, token = cp.ownerToken) => {
    const res = await cp.request('GET', `/v1/workspaces/${ws}/audit/verify`, { token });
    expect(res.status, res.text).toBe(200);
    return res.body as {
      ok: boolean;
      events: number;
      checkpoints: number;
      first_bad?: { seq: number; id: string | null; reason: string };
    };
  };

  const putSecret = async (ws: string, path: string, value: string, token = cp.ownerToken) => {
    const res = await cp.request('PUT', `/v1/workspaces/${ws}/secrets/${path}`, { token, body: { value } });
    expect(res.status, res.text).toBe(200);
  };

  const ingest = async (gatewayToken: string, events: Record<string, unknown>[]) => {
    const res = await cp.request('POST', '/v1/gateway/audit', { token: gatewayToken, body: { events } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ accepted: events.length, duplicates: 0, rejected: [] });
  };

  /** A fresh workspace whose chain holds what a working day leaves: secret writes, a policy change, gateway executions. */
  async function aChain(token = cp.ownerToken) {
    const ws = await aWorkspace(cp, token);
    const gateway = await aGateway(cp, token, ws.slug);
    await putSecret(ws.slug, 'github/token', 'ghp_first', token);
    await putSecret(ws.slug, 'slack/webhook', 'https://hooks.example.com/1', token);
    const policy = await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
      token,
      body: { rules: [{ id: 'read-github', effect: 'allow', servers: ['github'], tools: ['get_*'] }] },
    });
    expect(policy.status, policy.text).toBe(200);
    await ingest(gateway.token, [
      gatewayEvent(),
      gatewayEvent({
        tool: 'delete_repo',
        decision: 'deny',
        type: 'execution.denied',
        arguments: { repo: 'acme/prod' },
      }),
      gatewayEvent({ tool: 'list_issues', latency_ms: 40 }),
      gatewayEvent({ type: 'execution.failed', error: 'upstream timed out' }),
    ]);
    await putSecret(ws.slug, 'github/token', 'ghp_second', token);
    await putSecret(ws.slug, 'stripe/key', 'sk_live_x', token);
    const records = await rows(ws.id);
    expect(await verify(ws.slug, token)).toMatchObject({ ok: true, events: records.length });
    expect(records.length).toBeGreaterThanOrEqual(8);
    return { ws, gateway, records, head: records[records.length - 1]! };
  }

  /** Makes sure the chain's newest record carries a signed checkpoint (the periodic sweep may have made it already). */
  async function checkpointHead(chain: { head: ChainedRecord }) {
    const { head } = chain;
    await cp.cp.app
      .get(AuditService)
      .checkpoint({ chainId: head.chainId, organizationId: head.organizationId, workspaceId: head.workspaceId });
    const found = await su.query(
      'SELECT seq, hash, kind, key_id, signature FROM audit_checkpoints WHERE chain_id = $1::uuid AND seq = $2::bigint',
      [head.chainId, head.seq],
    );
    expect(found).toHaveLength(1);
    return found[0]! as { seq: unknown; hash: string; kind: string; key_id: string; signature: string };
  }

  it('a chain written through the API links every record to the one before, hashes what it stores, and verifies', async () => {
    const { ws, records, head } = await aChain();
    expect(records.map((r) => r.seq)).toEqual(records.map((_, i) => i + 1));
    expect(records[0]!.prevHash).toBe(GENESIS_HASH);
    for (let i = 1; i < records.length; i++) expect(records[i]!.prevHash).toBe(records[i - 1]!.hash);
    // an auditor holding only the rows recomputes every hash
    for (const { hash, ...rest } of records) expect(recordHash(rest)).toBe(hash);
    expect(records.map((r) => r.type)).toEqual(
      expect.arrayContaining(['secret.written', 'execution.succeeded', 'execution.failed']),
    );
    // secret values never reach the log
    expect(JSON.stringify(records)).not.toMatch(/ghp_first|ghp_second|sk_live_x|hooks\.example\.com/);

    const checkpoint = await checkpointHead({ head });
    expect(checkpoint).toMatchObject({ hash: head.hash, kind: 'periodic' });
    const published = await cp.cp.app.get(SigningKeysService).publicKeys('audit-checkpoint');
    const message = checkpointSigningInput({ chainId: head.chainId, seq: head.seq, hash: head.hash, kind: 'periodic' });
    expect(verifyEd25519(publicKeyFromX(published.get(checkpoint.key_id)!), message, checkpoint.signature)).toBe(true);
    expect(await verify(ws.slug)).toMatchObject({ ok: true, events: records.length, checkpoints: expect.any(Number) });
    expect((await verify(ws.slug)).checkpoints).toBeGreaterThanOrEqual(1);
  });

  it('the append-only trigger refuses UPDATE, DELETE and TRUNCATE, even with the retention flag set for an UPDATE', async () => {
    const { ws, records } = await aChain();
    const k = records[2]!;
    await expect(
      su.run([
        {
          sql: `UPDATE audit_events SET actor = 'user:mallory' WHERE chain_id = $1::uuid AND seq = $2::bigint`,
          params: [k.chainId, k.seq],
        },
      ]),
    ).rejects.toThrow(/append-only: UPDATE refused/);
    await expect(
      su.run([
        { sql: 'DELETE FROM audit_events WHERE chain_id = $1::uuid AND seq = $2::bigint', params: [k.chainId, k.seq] },
      ]),
    ).rejects.toThrow(/append-only: DELETE refused/);
    await expect(su.run([{ sql: 'TRUNCATE audit_events' }])).rejects.toThrow(/append-only: TRUNCATE refused/);
    // the flag the retention job sets lets it delete, and nothing else
    await expect(
      su.run([
        { sql: `SELECT set_config('aileron.audit_retention', 'on', true)` },
        {
          sql: `UPDATE audit_events SET actor = 'user:mallory' WHERE chain_id = $1::uuid AND seq = $2::bigint`,
          params: [k.chainId, k.seq],
        },
      ]),
    ).rejects.toThrow(/append-only: UPDATE refused/);
    expect(await rows(ws.id)).toEqual(records);
    expect(await verify(ws.slug)).toMatchObject({ ok: true, events: records.length });
  });

  describe('with the trigger bypassed, verify names the first record that is not what was written', () => {
    it.each([
      ['a denial turned into an allow', (r: ChainedRecord) => r.decision === 'deny', `decision = 'allow'`],
      [
        'the secret path in the data',
        (r: ChainedRecord) => r.type === 'secret.written',
        `data = jsonb_set(data, '{path}', '"nothing/here"')`,
      ],
      ['who did it', (r: ChainedRecord) => r.type === 'secret.written', `actor = 'user:mallory'`],
      [
        'when it happened',
        (r: ChainedRecord) => r.type === 'execution.failed',
        `occurred_at = occurred_at - interval '1 hour'`,
      ],
    ])('an edited field: %s', async (_label, pick, assignment) => {
      const { ws, records } = await aChain();
      const target = records.find(pick)!;
      await su.run(
        [
          {
            sql: `UPDATE audit_events SET ${assignment} WHERE chain_id = $1::uuid AND seq = $2::bigint`,
            params: [target.chainId, target.seq],
          },
        ],
        { bypass: true },
      );
      expect(await verify(ws.slug)).toMatchObject({
        ok: false,
        first_bad: { seq: target.seq, id: target.id, reason: expect.stringMatching(/edited/) },
      });
    });

    it('a deleted record', async () => {
      const { ws, records } = await aChain();
      const target = records.find((r) => r.decision === 'deny')!;
      await su.run(
        [
          {
            sql: 'DELETE FROM audit_events WHERE chain_id = $1::uuid AND seq = $2::bigint',
            params: [target.chainId, target.seq],
          },
        ],
        { bypass: true },
      );
      expect(await verify(ws.slug)).toMatchObject({
        ok: false,
        first_bad: { seq: target.seq, reason: expect.stringMatching(new RegExp(`record ${target.seq} is missing`)) },
      });
    });

    it('a forged record inserted in the middle, chained and hashed correctly, with the later records moved up', async () => {
      const { ws, records } = await aChain();
      const at = records.find((r) => r.decision === 'deny')!;
      const before = records.find((r) => r.seq === at.seq - 1)!;
      const [forged] = chainRecords(before, [
        { ...at, id: randomUUID(), type: 'secret.deleted', source: 'api', data: { path: 'stripe/key', versions: [1] } },
      ]);
      await su.run(
        [
          // two steps: the primary key is checked row by row
          {
            sql: 'UPDATE audit_events SET seq = -(seq + 1) WHERE chain_id = $1::uuid AND seq >= $2::bigint',
            params: [at.chainId, at.seq],
          },
          { sql: 'UPDATE audit_events SET seq = -seq WHERE chain_id = $1::uuid AND seq < 0', params: [at.chainId] },
          { sql: `INSERT INTO audit_events (${COLUMNS}) VALUES (${VALUES})`, params: valuesOf(forged!) },
        ],
        { bypass: true },
      );
      // the forgery itself is consistent; the record it displaced no longer follows it
      expect(await verify(ws.slug)).toMatchObject({
        ok: false,
        first_bad: { seq: at.seq + 1, id: at.id, reason: expect.stringMatching(/inserted/) },
      });
    });

    it('a forged record appended past the head', async () => {
      const { ws, head } = await aChain();
      const [forged] = chainRecords(head, [
        { ...head, id: randomUUID(), type: 'secret.read', data: { path: 'stripe/key' } },
      ]);
      await su.run([{ sql: `INSERT INTO audit_events (${COLUMNS}) VALUES (${VALUES})`, params: valuesOf(forged!) }], {
        bypass: true,
      });
      expect(await verify(ws.slug)).toMatchObject({
        ok: false,
        first_bad: { seq: head.seq + 1, reason: expect.stringMatching(/added outside the log/) },
      });
    });

    it('the contents of two records swapped', async () => {
      const { ws, records } = await aChain();
      const first = records.find((r) => r.decision === 'deny')!;
      const second = records[records.length - 2]!;
      expect(second.seq).toBeGreaterThan(first.seq);
      // the two rows trade places (the positions are the primary key, so by way of a free one)
      await su.run(
        [
          {
            sql: 'UPDATE audit_events SET seq = -1 WHERE chain_id = $1::uuid AND seq = $2::bigint',
            params: [first.chainId, first.seq],
          },
          {
            sql: 'UPDATE audit_events SET seq = $3::bigint WHERE chain_id = $1::uuid AND seq = $2::bigint',
            params: [first.chainId, second.seq, first.seq],
          },
          {
            sql: 'UPDATE audit_events SET seq = $2::bigint WHERE chain_id = $1::uuid AND seq = -1',
            params: [first.chainId, second.seq],
          },
        ],
        { bypass: true },
      );
      const swapped = await rows(ws.id);
      expect(swapped.find((r) => r.seq === first.seq)!.id).toBe(second.id);
      expect(await verify(ws.slug)).toMatchObject({
        ok: false,
        first_bad: { seq: first.seq, id: second.id, reason: expect.stringMatching(/prev_hash/) },
      });
    });

    it('the newest records deleted', async () => {
      const { ws, head } = await aChain();
      await su.run(
        [
          {
            sql: 'DELETE FROM audit_events WHERE chain_id = $1::uuid AND seq >= $2::bigint',
            params: [head.chainId, head.seq - 1],
          },
        ],
        { bypass: true },
      );
      expect(await verify(ws.slug)).toMatchObject({
        ok: false,
        first_bad: {
          seq: head.seq - 1,
          id: null,
          reason: `records ${head.seq - 1}..${head.seq} are missing from the end of the chain`,
        },
      });
    });

    it('tampering with one workspace leaves the others verifying', async () => {
      const untouched = await aChain();
      const { ws, records } = await aChain();
      await su.run(
        [{ sql: 'DELETE FROM audit_events WHERE chain_id = $1::uuid AND seq = 1', params: [records[0]!.chainId] }],
        { bypass: true },
      );
      expect((await verify(ws.slug)).first_bad).toMatchObject({ seq: 1 });
      expect(await verify(untouched.ws.slug)).toMatchObject({ ok: true, events: untouched.records.length });
    });
  });

  describe('signed checkpoints', () => {
    it('a checkpoint whose signature or hash was edited fails verification at its position', async () => {
      const chain = await aChain();
      const checkpoint = await checkpointHead(chain);
      const seq = chain.head.seq;
      const spoil = (assignment: string, params: unknown[]) =>
        su.run([
          {
            sql: `UPDATE audit_checkpoints SET ${assignment} WHERE chain_id = $1::uuid AND seq = $2::bigint`,
            params: [chain.head.chainId, seq, ...params],
          },
        ]);

      // another valid signature, made for a different record
      const other = (
        await su.query(
          'SELECT signature FROM audit_checkpoints WHERE seq <> $1::bigint OR chain_id <> $2::uuid LIMIT 1',
          [seq, chain.head.chainId],
        )
      )[0];
      await spoil('signature = $3', [
        other?.signature ?? checkpoint.signature.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')),
      ]);
      expect(await verify(chain.ws.slug)).toMatchObject({
        ok: false,
        first_bad: { seq, id: null, reason: expect.stringMatching(/bad signature/) },
      });

      await spoil('signature = $3', [checkpoint.signature]);
      expect((await verify(chain.ws.slug)).ok).toBe(true);

      await spoil('hash = $3', ['f'.repeat(64)]);
      expect(await verify(chain.ws.slug)).toMatchObject({
        ok: false,
        first_bad: { seq, reason: expect.stringMatching(/bad signature/) },
      });

      // a spoilt checkpoint at the end does not hide an edit earlier on
      const earlier = chain.records[1]!;
      await su.run(
        [
          {
            sql: `UPDATE audit_events SET actor = 'user:mallory' WHERE chain_id = $1::uuid AND seq = $2::bigint`,
            params: [earlier.chainId, earlier.seq],
          },
        ],
        { bypass: true },
      );
      expect(await verify(chain.ws.slug)).toMatchObject({
        ok: false,
        first_bad: { seq: earlier.seq, id: earlier.id, reason: expect.stringMatching(/edited/) },
      });
    });

    it('a record rewritten and every later record re-hashed, head included, still contradicts the signed checkpoint', async () => {
      const chain = await aChain();
      await checkpointHead(chain);
      const target = chain.records.find((r) => r.decision === 'deny')!;
      const forged = relinked(
        chain.records.map((r) => (r.seq === target.seq ? { ...r, decision: 'allow', type: 'execution.succeeded' } : r)),
        target.seq,
      );
      const newHead = forged[forged.length - 1]!;
      await su.run(
        [
          {
            sql: 'DELETE FROM audit_events WHERE chain_id = $1::uuid AND seq >= $2::bigint',
            params: [target.chainId, target.seq],
          },
          ...forged.map((r) => ({
            sql: `INSERT INTO audit_events (${COLUMNS}) VALUES (${VALUES})`,
            params: valuesOf(r),
          })),
          { sql: 'UPDATE audit_heads SET hash = $2 WHERE chain_id = $1::uuid', params: [target.chainId, newHead.hash] },
        ],
        { bypass: true },
      );
      // every link holds now: only the signature remembers what was there
      const stored = await rows(chain.ws.id);
      for (const { hash, ...rest } of stored) expect(recordHash(rest)).toBe(hash);
      // the first signed position at or after the rewrite (the head's, unless the periodic sweep signed one earlier)
      const signedAt = (
        await su.query('SELECT seq FROM audit_checkpoints WHERE chain_id = $1::uuid AND seq >= $2::bigint', [
          target.chainId,
          target.seq,
        ])
      ).map((c) => Number(c.seq));
      const caughtAt = Math.min(...signedAt);
      expect(await verify(chain.ws.slug)).toMatchObject({
        ok: false,
        first_bad: {
          seq: caughtAt,
          id: chain.records.find((r) => r.seq === caughtAt)!.id,
          reason: expect.stringMatching(/contradicts the signed checkpoint/),
        },
      });
    });

    it('the newest record cut together with the head is missing from under its checkpoint', async () => {
      const chain = await aChain();
      await checkpointHead(chain);
      const { head } = chain;
      const before = chain.records[chain.records.length - 2]!;
      await su.run(
        [
          {
            sql: 'DELETE FROM audit_events WHERE chain_id = $1::uuid AND seq = $2::bigint',
            params: [head.chainId, head.seq],
          },
          {
            sql: 'UPDATE audit_heads SET seq = $2::bigint, hash = $3 WHERE chain_id = $1::uuid',
            params: [head.chainId, before.seq, before.hash],
          },
        ],
        { bypass: true },
      );
      expect(await verify(chain.ws.slug)).toMatchObject({
        ok: false,
        first_bad: { seq: head.seq, reason: expect.stringMatching(/covers record \d+, which is missing/) },
      });
    });
  });

  it('retention removes old records under a signed anchor; what remains, and what comes after, still verifies', async () => {
    const org = await anOrganization(cp);
    const set = await cp.request('PUT', '/v1/organization/audit-retention', { token: org.token, body: { days: 30 } });
    expect([set.status, set.body]).toEqual([200, { days: 30 }]);
    expect((await cp.request('GET', '/v1/organization/audit-retention', { token: org.token })).body).toEqual({
      days: 30,
    });

    const old = await aChain(org.token);
    // the periodic checkpoint lands on what becomes the retention edge: the usual case for a chain that went quiet
    await checkpointHead(old);
    await new Promise((r) => setTimeout(r, 20));
    const mark = Date.now();
    await new Promise((r) => setTimeout(r, 20));
    await putSecret(old.ws.slug, 'github/token', 'ghp_third', org.token);
    await ingest(old.gateway.token, [
      gatewayEvent({ session: 'after-mark' }),
      gatewayEvent({ session: 'after-mark', tool: 'list_issues' }),
    ]);
    const all = await rows(old.ws.id);
    const kept = all.filter((r) => r.recordedAt.getTime() >= mark);
    const removed = all.filter((r) => r.recordedAt.getTime() < mark);
    expect(kept.length).toBeGreaterThanOrEqual(3);
    expect(removed.map((r) => r.seq)).toEqual(old.records.map((r) => r.seq));

    // 30 days kept, run as if the records before the mark were 30 days old
    const audit = cp.cp.app.get(AuditService);
    expect(await audit.applyRetention(new Date(mark + 30 * 86_400_000))).toBeGreaterThanOrEqual(removed.length);

    expect(await rows(old.ws.id)).toEqual(kept);
    const anchors = await su.query(
      `SELECT seq, hash FROM audit_checkpoints WHERE chain_id = $1::uuid AND kind = 'retention'`,
      [old.ws.id],
    );
    expect(anchors.map((a) => [Number(a.seq), a.hash])).toEqual([[old.head.seq, old.head.hash]]);
    expect(await verify(old.ws.slug, org.token)).toMatchObject({ ok: true, events: kept.length });
    const search = await cp.request('GET', `/v1/workspaces/${old.ws.slug}/audit?limit=500`, { token: org.token });
    expect(search.body.events.map((e: { id: string }) => e.id).sort()).toEqual(kept.map((r) => r.id).sort());
    // the organisation's own chain (the retention change itself) went the same way and still verifies
    const orgVerify = await cp.request('GET', '/v1/audit/verify', { token: org.token });
    expect(orgVerify.body).toMatchObject({ ok: true });

    // a second run removes nothing more
    expect(await audit.applyRetention(new Date(mark + 30 * 86_400_000))).toBe(0);

    await putSecret(old.ws.slug, 'slack/webhook', 'https://hooks.example.com/2', org.token);
    await ingest(old.gateway.token, [gatewayEvent({ session: 'later' })]);
    const after = await rows(old.ws.id);
    expect(after.length).toBe(kept.length + 2);
    expect(after[0]!.prevHash).toBe(old.head.hash);
    expect(await verify(old.ws.slug, org.token)).toMatchObject({ ok: true, events: after.length });

    // and the anchor keeps protecting the start: removing the first kept record is still caught
    await su.run(
      [
        {
          sql: 'DELETE FROM audit_events WHERE chain_id = $1::uuid AND seq = $2::bigint',
          params: [old.ws.id, after[0]!.seq],
        },
      ],
      { bypass: true },
    );
    expect(await verify(old.ws.slug, org.token)).toMatchObject({ ok: false, first_bad: { seq: after[0]!.seq } });
  });
});
