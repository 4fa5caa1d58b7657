import { randomBytes } from 'node:crypto';
import { sign, verify } from 'jsonwebtoken';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rootKeyId } from '../../libs/platform/keys/src';
import { aReplicaOf, startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { sql } from './local-idp';

describe('the HS256 key of the JWTs the control plane issues (server mode)', () => {
  const k1 = randomBytes(32).toString('base64');
  const k2 = randomBytes(32).toString('base64');
  const id1 = rootKeyId(Buffer.from(k1, 'base64'));
  const id2 = rootKeyId(Buffer.from(k2, 'base64'));
  let first: TestControlPlane;
  let replica: TestControlPlane | undefined;

  beforeAll(async () => {
    first = await startTestControlPlane('postgres', { AILERON_ROOT_KEY: k1 });
  });
  afterAll(async () => {
    await replica?.close();
    await first?.close();
  });

  /** A fresh replica of the installation with these root keys (the previous replica stopped): it reads every key anew. */
  async function replicaWith(rootKey: string): Promise<TestControlPlane> {
    await replica?.close();
    replica = await aReplicaOf(first, { AILERON_ROOT_KEY: rootKey });
    return replica;
  }

  async function storedKey(cp: TestControlPlane): Promise<string> {
    const [row] = await sql<{ value: string }>(cp, `SELECT value FROM system_secrets WHERE name = 'jwt-signing-key'`);
    return row!.value;
  }

  it('is stored sealed by the root key: the database alone verifies (and forges) no JWT', async () => {
    const cp = first;
    const issued = await cp.request('POST', '/v1/auth/token');
    expect(issued.status, issued.text).toBe(201);
    expect((await cp.request('GET', '/v1/me', { token: issued.body.token })).status).toBe(200);

    const stored = await storedKey(cp);
    expect(stored.startsWith(`${id1}.`)).toBe(true);
    for (const candidate of [
      stored,
      Buffer.from(stored, 'base64url'),
      Buffer.from(stored.slice(stored.indexOf('.') + 1), 'base64url'),
    ]) {
      expect(() => verify(issued.body.token, candidate, { algorithms: ['HS256'] })).toThrow(/invalid signature/);
    }
  });

  it('keeps verifying the JWTs of a key an older version stored in the clear, seals that key at start, and moves it with a root key rotation', async () => {
    const owner = first.ownerToken;
    let cp = first;
    const me = (await cp.request('GET', '/v1/me')).body;
    // what an older version left in the database, and a JWT it issued with it
    const legacy = randomBytes(32).toString('base64url');
    await sql(cp, `UPDATE system_secrets SET value = $1 WHERE name = 'jwt-signing-key'`, legacy);
    const before = sign({ org: me.organization.id }, legacy, {
      algorithm: 'HS256',
      subject: `token:${me.principal.id}`,
      issuer: cp.cp.config.publicUrl,
      audience: 'aileron-control-plane',
      expiresIn: 600,
    });

    cp = await replicaWith(k1);
    const stored = await storedKey(cp);
    expect(stored).not.toContain(legacy);
    expect(stored.startsWith(`${id1}.`)).toBe(true);
    const after = await cp.request('GET', '/v1/me', { token: before });
    expect(after.status, after.text).toBe(200);
    expect(after.body.principal.id).toBe(me.principal.id);

    cp = await replicaWith(`${k2},${k1}`);
    expect((await cp.request('POST', '/v1/vault/rewrap-root', { token: owner })).status).toBe(200);
    expect((await storedKey(cp)).startsWith(`${id2}.`)).toBe(true);

    // the old root key is gone: the JWT still verifies, and new ones are issued
    cp = await replicaWith(k2);
    expect((await cp.request('GET', '/v1/me', { token: before })).status).toBe(200);
    const fresh = await cp.request('POST', '/v1/auth/token', { token: owner });
    expect((await cp.request('GET', '/v1/me', { token: fresh.body.token })).status).toBe(200);
  });
});
