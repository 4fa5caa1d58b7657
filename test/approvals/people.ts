import { KeyObject } from 'node:crypto';
import { createServer, Server } from 'node:http';
import { sign } from 'jsonwebtoken';
import { expect } from 'vitest';
import { aUser } from '../support/builders';
import type { TestControlPlane } from '../support/control-plane';
import { rsaKeyPair } from '../support/rsa-keys';

const ISSUER = 'https://login.approvals.example.test/';
const AUDIENCE = 'aileron';

/** A person who signs in through the organisation's identity provider. */
export interface Person {
  id: string;
  email: string;
  /** an IdP JWT that signs them in (valid for an hour) */
  token: string;
}

/**
 * People who sign in as themselves. An API token acts for itself, not for a
 * user, so approvals that name people (users, groups, rotations, separation of
 * duties by e-mail) need real sign-ins: this is a local identity provider (an
 * RSA key served as a JWKS, as test/auth/oidc.test.ts does) that the
 * organisation trusts, and JWTs it mints for users by e-mail.
 */
export class People {
  private readonly key: KeyObject;
  private readonly publicJwk: Record<string, unknown>;
  private readonly kid = 'approvals-test-key';
  private server: Server | undefined;
  private jwksUrl = '';

  constructor() {
    const { privateKey, publicKey } = rsaKeyPair();
    this.key = privateKey;
    this.publicJwk = publicKey.export({ format: 'jwk' }) as Record<string, unknown>;
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      if (req.url !== '/jwks') return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: [{ ...this.publicJwk, kid: this.kid, use: 'sig', alg: 'RS256' }] }));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    this.jwksUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/jwks`;
  }

  /** What a server-mode control plane needs to reach this IdP's JWKS on loopback (embedded mode allows loopback). */
  readonly outboundEnv = { UPSTREAM_ALLOW_CIDRS: '127.0.0.1/32' };

  stop(): Promise<void> {
    return new Promise((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /**
   * Makes the identity provider the organisation's (the owner token's). No
   * role claim: roles stay what the admin gave the pre-provisioned user. In
   * server mode the control plane must be started with `people.outboundEnv`:
   * the JWKS is on loopback.
   */
  async trustedBy(cp: TestControlPlane, ownerToken = cp.ownerToken): Promise<void> {
    const res = await cp.request('PUT', '/v1/organization/identity-provider', {
      token: ownerToken,
      body: { issuer: ISSUER, jwks_url: this.jwksUrl, audience: AUDIENCE },
    });
    expect(res.status, res.text).toBe(200);
  }

  tokenFor(email: string): string {
    return sign({ sub: `idp|${email}`, email, email_verified: true }, this.key, {
      algorithm: 'RS256',
      keyid: this.kid,
      issuer: ISSUER,
      audience: AUDIENCE,
      expiresIn: 3600,
    });
  }

  /**
   * A user the admin provisioned, with `role` in the workspace, signed in
   * once (the first sign-in links the IdP identity to the user by e-mail).
   */
  async aPerson(
    cp: TestControlPlane,
    workspace: string,
    role: 'owner' | 'admin' | 'approver' | 'member' | 'auditor' = 'member',
  ): Promise<Person> {
    const user = await aUser(cp, cp.ownerToken, 'member');
    const member = await cp.request('PUT', `/v1/workspaces/${workspace}/members/${user.id}`, { body: { role } });
    expect(member.status, member.text).toBe(200);
    const token = this.tokenFor(user.email);
    const me = await cp.request('GET', '/v1/me', { token });
    expect(me.status, me.text).toBe(200);
    expect(me.body.principal).toMatchObject({ kind: 'user', id: user.id });
    return { ...user, token };
  }
}
