import { createHash, createPublicKey, verify } from 'node:crypto';
import { createServer, IncomingMessage, Server } from 'node:http';
import canonicalize from 'canonicalize';
import { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditService } from '../../libs/audit/src';
import { SystemScopes } from '../../libs/auth/src/scope-issuer';
import { verifySignedPayload } from '../../libs/platform/net/src';
import { startApiControlPlane, startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { anOrganization, aToken, aWorkspace } from '../support/builders';
import { eventually } from '../support/eventually';

/** A SIEM stand-in: fails the first `failures` deliveries, then keeps every body it accepts. */
async function receiver(failures: number): Promise<{
  url: string;
  bodies: { raw: string; headers: IncomingMessage['headers'] }[];
  attempts: number;
  server: Server;
}> {
  const state = { bodies: [] as { raw: string; headers: IncomingMessage['headers'] }[], attempts: 0 };
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString('utf8')));
    req.on('end', () => {
      state.attempts++;
      if (state.attempts <= failures) {
        res.writeHead(503).end();
        return;
      }
      state.bodies.push({ raw, headers: req.headers });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const out = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/siem`,
    server,
    get bodies() {
      return state.bodies;
    },
    get attempts() {
      return state.attempts;
    },
  };
  return out;
}

describe('admin changes are audited with the change', () => {
  let cp: TestControlPlane;
  beforeAll(async () => {
    cp = await startApiControlPlane();
  });
  afterAll(async () => cp?.close());

  it('a policy write, a token, a login and a workspace land in the right chains, naming who did it', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const put = await cp.request('PUT', `/v1/workspaces/${ws.slug}/policy`, {
      body: { rules: [{ id: 'r1', effect: 'deny', tools: ['x'] }] },
    });
    expect(put.status).toBe(200);
    const token = await aToken(cp, cp.ownerToken, { role: 'member', workspace: ws.slug });
    const jwt = await cp.request('POST', '/v1/auth/token');
    expect(jwt.status).toBe(201);

    const me = (await cp.request('GET', '/v1/me')).body;
    const actor = `token:${me.principal.id}`;
    const wsAudit = (await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?type=policy.updated`)).body;
    expect(wsAudit.events).toHaveLength(1);
    expect(wsAudit.events[0]).toMatchObject({
      type: 'policy.updated',
      actor,
      source: 'api',
      data: { version: 1, rules: 1 },
    });

    const org = (await cp.request('GET', '/v1/audit?type=token.created,auth.login,workspace.created&limit=500')).body;
    expect(org.events.map((e: { type: string }) => e.type)).toContain('auth.login');
    // a token limited to one workspace is that workspace's business: its chain records it
    const wsTokens = (await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?type=token.created`)).body.events;
    expect(wsTokens.find((e: { data: { token_id?: string } }) => e.data.token_id === token.id)).toMatchObject({
      actor,
    });
    expect(org.events.find((e: { type: string }) => e.type === 'auth.login')).toMatchObject({
      actor,
      data: { method: 'jwt_issued' },
    });
    // the workspace's own creation is the first record of its chain
    const created = (await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?type=workspace.created`)).body.events;
    expect(created).toHaveLength(1);
    expect(created[0].seq).toBe(1);

    for (const path of [`/v1/workspaces/${ws.slug}/audit/verify`, '/v1/audit/verify']) {
      expect((await cp.request('GET', path)).body, path).toMatchObject({ ok: true });
    }
  });

  it('a change whose transaction fails leaves no audit record', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const before = (await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?limit=500`)).body.events.length;
    // a taken slug fails inside the transaction that would have recorded workspace.created
    const again = await cp.request('POST', '/v1/workspaces', { body: { slug: ws.slug, name: 'again' } });
    expect(again.status).toBe(409);
    expect((await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?limit=500`)).body.events.length).toBe(before);
    const orgCreations = (await cp.request('GET', '/v1/audit?type=workspace.created&limit=500')).body.events.filter(
      (e: { data: { workspace?: string } }) => e.data.workspace === ws.slug,
    );
    expect(orgCreations.length).toBeLessThanOrEqual(1);
  });
});

describe('SIEM sinks', () => {
  let cp: TestControlPlane;
  beforeAll(async () => {
    cp = await startTestControlPlane('postgres', { UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32' });
  });
  afterAll(async () => cp?.close());

  it('refuses private and metadata targets that the organisation has not allowed', async () => {
    for (const url of [
      'http://10.1.2.3/siem',
      'http://169.254.169.254/latest/meta-data',
      'http://[::1]:9/x',
      'ftp://example.com/x',
    ]) {
      const res = await cp.request('POST', '/v1/audit/sinks', { body: { name: `bad-${Math.random()}`, url } });
      expect(res.status, url).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
      expect(res.text).not.toContain('meta-data');
    }
  });

  it('a sink that fails twice then answers gets every record once, in order, signed; the cursor survives a restart', async () => {
    const siem = await receiver(2);
    try {
      const created = await cp.request('POST', '/v1/audit/sinks', { body: { name: 'siem', url: siem.url } });
      expect(created.status).toBe(201);
      const secret: string = created.body.secret;
      expect(secret).toMatch(/^whsec_/);
      expect((await cp.request('GET', '/v1/audit/sinks')).text).not.toContain(secret);

      const ws = await aWorkspace(cp, cp.ownerToken);
      for (let i = 0; i < 5; i++) {
        expect(
          (await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/app/key-${i}`, { body: { value: `v-${i}` } }))
            .status,
        ).toBe(200);
      }
      const chain = (await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?limit=500`)).body.events as {
        id: string;
        seq: number;
      }[];
      const wanted = new Set(chain.map((e) => e.id));

      const delivered = (): { id: string; seq: number; chain: string }[] =>
        siem.bodies.flatMap((b) => {
          const body = JSON.parse(b.raw) as { chain: string; events: { id: string; seq: number }[] };
          return body.events.map((e) => ({ id: e.id, seq: e.seq, chain: body.chain }));
        });
      await eventually(
        'the workspace chain at the sink',
        () => chain.every((e) => delivered().some((d) => d.id === e.id)),
        { timeoutMs: 60_000 },
      );
      expect(siem.attempts).toBeGreaterThanOrEqual(3);

      for (const body of siem.bodies) {
        const verdict = verifySignedPayload(secret, body.raw, {
          timestamp: String(body.headers['x-aileron-timestamp']),
          signature: String(body.headers['x-aileron-signature']),
        });
        expect(verdict).toEqual({ ok: true });
        expect(body.headers['x-aileron-delivery']).toBeTruthy();
      }
      const ours = delivered().filter((d) => wanted.has(d.id));
      expect(ours.map((d) => d.seq)).toEqual([...ours.map((d) => d.seq)].sort((a, b) => a - b));
      expect(new Set(ours.map((d) => d.id)).size).toBe(ours.length);

      // a restart resumes from the stored cursor: only new records are sent
      const sent = delivered().length;
      const url = cp.cp.config.database.kind === 'postgres' ? cp.cp.config.database.url : '';
      await cp.cp.close();
      const replica = await startTestControlPlane('postgres', {
        DATABASE_URL: url,
        UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32',
      });
      try {
        expect(
          (
            await replica.request('PUT', `/v1/workspaces/${ws.slug}/secrets/app/after-restart`, {
              token: cp.ownerToken,
              body: { value: 'x' },
            })
          ).status,
        ).toBe(200);
        await eventually('the record written after the restart', async () => {
          const last = (
            await replica.request('GET', `/v1/workspaces/${ws.slug}/audit?limit=1`, { token: cp.ownerToken })
          ).body.events[0];
          return delivered().some((d) => d.id === last.id);
        });
        const all = delivered();
        expect(new Set(all.map((d) => `${d.chain}:${d.seq}`)).size, 'nothing sent twice').toBe(all.length);
        expect(all.length).toBeGreaterThan(sent);
        const status = (await replica.request('GET', '/v1/audit/sinks', { token: cp.ownerToken })).body.sinks[0];
        expect(status).toMatchObject({ name: 'siem', host: new URL(siem.url).host });
        expect(status.last_delivered_at).not.toBeNull();
      } finally {
        await replica.close();
      }
    } finally {
      siem.server.close();
    }
  });
});

describe('pausing and resuming a SIEM sink', () => {
  let cp: TestControlPlane;
  beforeAll(async () => {
    cp = await startTestControlPlane('pglite');
  });
  afterAll(async () => cp?.close());

  /** The ids of the records a receiver has been sent, in the order it got them. */
  const idsAt = (siem: Awaited<ReturnType<typeof receiver>>): string[] =>
    siem.bodies.flatMap((b) => (JSON.parse(b.raw) as { events: { id: string }[] }).events.map((e) => e.id));

  it('a paused sink is sent nothing; resumed, it gets what was written meanwhile, once; another organisation gets 404', async () => {
    const paused = await receiver(0);
    // never paused: it shows when a delivery has had its chance
    const witness = await receiver(0);
    try {
      const sinks = [];
      for (const [name, siem] of [
        ['paused', paused],
        ['witness', witness],
      ] as const) {
        const created = await cp.request('POST', '/v1/audit/sinks', { body: { name, url: siem.url } });
        expect(created.status, created.text).toBe(201);
        sinks.push(created.body.id as string);
      }
      const [id] = sinks;
      const ws = await aWorkspace(cp, cp.ownerToken);
      const write = async (key: string): Promise<string> => {
        const put = await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/app/${key}`, { body: { value: key } });
        expect(put.status, put.text).toBe(200);
        return (await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?limit=1`)).body.events[0].id as string;
      };
      const before = await write('before');
      await eventually('the first record at both sinks', () =>
        [paused, witness].every((siem) => idsAt(siem).includes(before)),
      );

      const pause = await cp.request('POST', `/v1/audit/sinks/${id}/pause`);
      expect(pause.status, pause.text).toBe(200);
      expect(pause.body).toMatchObject({ id, name: 'paused', enabled: false });
      // pausing a paused sink changes nothing, and records nothing
      expect((await cp.request('POST', `/v1/audit/sinks/${id}/pause`)).body.enabled).toBe(false);
      const listed = (await cp.request('GET', '/v1/audit/sinks')).body.items;
      expect(listed.find((s: { id: string }) => s.id === id).enabled).toBe(false);

      const meanwhile = [await write('while-paused-1'), await write('while-paused-2')];
      await eventually('the records written while paused at the witness', () =>
        meanwhile.every((r) => idsAt(witness).includes(r)),
      );
      expect(idsAt(paused).filter((r) => meanwhile.includes(r))).toEqual([]);

      // another organisation's owner: the sink does not exist for them, and stays paused
      const other = await anOrganization(cp);
      for (const action of ['resume', 'pause']) {
        const res = await cp.request('POST', `/v1/audit/sinks/${id}/${action}`, { token: other.token });
        expect(res.status, res.text).toBe(404);
        expect(res.body.code).toBe('AUDIT_SINK_NOT_FOUND');
      }
      const member = await aToken(cp, cp.ownerToken, { role: 'member' });
      expect((await cp.request('POST', `/v1/audit/sinks/${id}/resume`, { token: member.token })).status).toBe(403);
      expect(
        (await cp.request('GET', '/v1/audit/sinks')).body.items.find((s: { id: string }) => s.id === id),
      ).toMatchObject({ enabled: false });

      const resume = await cp.request('POST', `/v1/audit/sinks/${id}/resume`);
      expect(resume.status, resume.text).toBe(200);
      expect(resume.body.enabled).toBe(true);
      await eventually('the records written while paused at the resumed sink', () =>
        meanwhile.every((r) => idsAt(paused).includes(r)),
      );
      const after = idsAt(paused);
      expect(new Set(after).size, 'nothing sent twice').toBe(after.length);

      // who paused and resumed it, in the organisation's chain
      const audited = (await cp.request('GET', '/v1/audit?type=audit.sink_paused,audit.sink_resumed&limit=500')).body
        .items as { type: string; actor: string; data: { sink: string } }[];
      const me = (await cp.request('GET', '/v1/me')).body;
      expect(audited.filter((r) => r.data.sink === id).map((r) => [r.type, r.actor])).toEqual([
        ['audit.sink_resumed', `token:${me.principal.id}`],
        ['audit.sink_paused', `token:${me.principal.id}`],
      ]);
    } finally {
      paused.server.close();
      witness.server.close();
    }
  });
});

describe('verifying an export without the control plane', () => {
  let cp: TestControlPlane;
  beforeAll(async () => {
    cp = await startApiControlPlane();
  });
  afterAll(async () => cp?.close());

  it('recomputes every hash from the documented canonical form and checks the signed checkpoint with the published key', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    for (let i = 0; i < 3; i++)
      await cp.request('PUT', `/v1/workspaces/${ws.slug}/secrets/k${i}`, { body: { value: `v${i}` } });
    await cp.cp.app.get(AuditService).checkpoint({
      chainId: ws.id,
      organizationId: (await cp.request('GET', '/v1/organization')).body.id,
      workspaceId: ws.id,
    });

    const exported = (await cp.request('GET', `/v1/workspaces/${ws.slug}/audit/export`)).text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const { checkpoints } = (await cp.request('GET', `/v1/workspaces/${ws.slug}/audit/checkpoints`)).body;
    const { keys } = (await cp.request('GET', '/.well-known/aileron/audit-keys', { token: null })).body;
    expect(exported).toHaveLength(4);
    expect(checkpoints).toHaveLength(1);

    let prev = '0'.repeat(64);
    for (const r of exported) {
      const canonical = canonicalize({
        v: 1,
        chain: r.chain_id,
        organization: r.organization_id,
        workspace: r.workspace_id,
        seq: r.seq,
        id: r.id,
        type: r.type,
        recorded_at: r.recorded_at,
        occurred_at: r.occurred_at,
        source: r.source,
        actor: r.actor,
        principal: r.principal,
        execution_mode: r.execution_mode,
        server: r.server,
        tool: r.tool,
        decision: r.decision,
        session: r.session,
        data: r.data,
        prev_hash: r.prev_hash,
      });
      expect(r.prev_hash).toBe(prev);
      expect(createHash('sha256').update(canonical!).digest('hex'), `record ${r.seq}`).toBe(r.hash);
      prev = r.hash;
    }
    const checkpoint = checkpoints[0];
    expect(checkpoint).toMatchObject({ seq: 4, hash: prev, kind: 'periodic' });
    const key = keys.find((k: { kid: string }) => k.kid === checkpoint.key_id);
    const message = `aileron-audit-checkpoint/v1\n${canonicalize({ chain: ws.id, seq: checkpoint.seq, hash: checkpoint.hash, kind: checkpoint.kind })}`;
    const publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: key.x }, format: 'jwk' });
    expect(verify(null, Buffer.from(message), publicKey, Buffer.from(checkpoint.signature, 'base64url'))).toBe(true);
    expect(
      verify(
        null,
        Buffer.from(message.replace(`"seq":4`, `"seq":3`)),
        publicKey,
        Buffer.from(checkpoint.signature, 'base64url'),
      ),
    ).toBe(false);
  });
});

describe('text the database would change', () => {
  let cp: TestControlPlane;
  beforeAll(async () => {
    cp = await startTestControlPlane('postgres');
  });
  afterAll(async () => cp?.close());

  it('a lone surrogate recorded through a domain is hashed as stored, so the chain still verifies', async () => {
    const ws = await aWorkspace(cp, cp.ownerToken);
    const scope = SystemScopes.workspace((await cp.request('GET', '/v1/organization')).body.id, ws);
    await cp.cp.app.get(AuditService).recordNow(scope, {
      type: 'test.recorded',
      actor: 'user:\ud800x',
      tool: 'a\udc00',
      data: { note: 'b\ud83d', nested: ['\udfff'] },
    });
    const [record] = (await cp.request('GET', `/v1/workspaces/${ws.slug}/audit?type=test.recorded`)).body.events;
    expect(record).toMatchObject({
      actor: 'user:\ufffdx',
      tool: 'a\ufffd',
      data: { note: 'b\ufffd', nested: ['\ufffd'] },
    });
    expect((await cp.request('GET', `/v1/workspaces/${ws.slug}/audit/verify`)).body).toMatchObject({ ok: true });
  });
});
