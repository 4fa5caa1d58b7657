import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAVEAT_TOKEN_PREFIX } from '../../libs/sessions/src';
import { anOrganization, aWorkspace } from '../support/builders';
import { captureOutput, CapturedOutput } from '../support/captured-output';
import { startTestControlPlane, TestControlPlane } from '../support/control-plane';
import { BACKENDS } from '../support/databases';
import { connect } from '../pool/mcp-client';

interface Session {
  id: string;
  caveat_token: string;
}

interface Answer {
  status: number;
  code: unknown;
  title: unknown;
  detail: unknown;
}

/** Where a session token is presented: a REST route, the MCP route, and the MCP fast path (an open MCP session's id). */
type Surface = 'rest' | 'mcp' | 'mcp-fast-path';
const SURFACES: Surface[] = ['rest', 'mcp', 'mcp-fast-path'];
const RUNS = 1_200;

/** The macaroon's bytes: version, field type, then the identifier's length (one byte: a minted identifier is 111 bytes). */
const macaroonOf = (token: string): Buffer => Buffer.from(token.slice(CAVEAT_TOKEN_PREFIX.length), 'base64url');
const tokenOf = (bytes: Buffer): string => CAVEAT_TOKEN_PREFIX + bytes.toString('base64url');

/** `ail1 <organization> <key> <session> <nonce>` of a token. */
function identifierParts(token: string): string[] {
  const bytes = macaroonOf(token);
  return bytes
    .subarray(3, 3 + bytes[2]!)
    .toString('utf8')
    .split(' ');
}

/** A field length as the format writes it: seven bits a byte, low first. */
function varint(n: number): Buffer {
  const out: number[] = [];
  for (; n >= 0x80; n >>>= 7) out.push((n & 0x7f) | 0x80);
  out.push(n);
  return Buffer.from(out);
}

/** The token with another identifier and its old signature: what anyone can forge without a key. */
function withIdentifier(token: string, parts: string[]): string {
  const bytes = macaroonOf(token);
  const identifier = Buffer.from(parts.join(' '), 'utf8');
  return tokenOf(
    Buffer.concat([bytes.subarray(0, 2), varint(identifier.length), identifier, bytes.subarray(3 + bytes[2]!)]),
  );
}

function withPart(token: string, index: 1 | 2 | 3, value: string): string {
  const parts = identifierParts(token);
  parts[index] = value;
  return withIdentifier(token, parts);
}

/** Log lines at `warn` or above: what an operator is paged or alerted by. */
function loudLines(lines: string[]): string[] {
  return lines.filter((line) => /"level":"(warn|error|fatal)"/.test(line));
}

/**
 * A token anyone can make, forged or garbled, is refused the same way however
 * it fails: 401 TOKEN_INVALID with one message, never a 500 and never a log
 * line above info (an unauthenticated caller must not be able to flood the
 * log or learn which organisations and keys exist).
 */
describe.each(BACKENDS)('forged and garbled session tokens on %s', (backend) => {
  let output: CapturedOutput;
  let cp: TestControlPlane;
  let ws: { slug: string; id: string };
  let session: Session;
  let mcpSessionId: string;
  let closeMcp: () => Promise<void>;

  /** `sessionId` only matters to a token that passes: the guard judges the token before the route looks at its path. */
  async function present(token: string, surface: Surface, sessionId = session.id): Promise<Answer> {
    let response: Response;
    if (surface === 'rest') {
      response = await fetch(`${cp.url}/v1/sessions/${sessionId}/messages`, {
        headers: { authorization: `Bearer ${token}` },
      });
    } else {
      response = await fetch(`${cp.url}/mcp/${ws.slug}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...(surface === 'mcp-fast-path'
            ? { 'mcp-session-id': mcpSessionId, 'mcp-protocol-version': '2025-11-25' }
            : {}),
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
      });
    }
    const text = await response.text();
    let body: Record<string, unknown> = {};
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      body = { unparsed: text };
    }
    return { status: response.status, code: body.code, title: body.title, detail: body.detail };
  }

  async function newSession(): Promise<Session> {
    const res = await cp.request('POST', '/v1/sessions', { body: { workspace: ws.slug, name: 'forgery target' } });
    expect(res.status, res.text).toBe(201);
    return res.body as Session;
  }

  beforeAll(async () => {
    output = captureOutput();
    try {
      // info: every 401 writes its request line, which shows the capture sees the log
      cp = await startTestControlPlane(backend, { LOG_LEVEL: 'info' });
    } catch (error) {
      output.restore();
      throw error;
    }
    ws = await aWorkspace(cp, cp.ownerToken);
    session = await newSession();
    const { client, transport } = await connect(cp, session.caveat_token, `/mcp/${ws.slug}`);
    mcpSessionId = transport.sessionId!;
    closeMcp = () => client.close();
  });
  afterAll(async () => {
    try {
      await closeMcp?.();
      await cp?.close();
    } finally {
      output?.restore();
    }
  });

  it('the genuine token works on every surface (the control for everything below)', async () => {
    expect((await present(session.caveat_token, 'rest')).status).toBe(200);
    expect((await present(session.caveat_token, 'mcp-fast-path')).status).toBe(200);
  });

  it('an identifier naming a non-UUID organisation, an unknown one, another one, an unknown key or a removed key: one 401, one message, nothing logged above info', async () => {
    const linesBefore = output.lines().length;
    const [, organizationId, keyId, sessionId] = identifierParts(session.caveat_token) as [
      string,
      string,
      string,
      string,
    ];
    const other = await anOrganization(cp);
    const otherWs = await aWorkspace(cp, other.token);
    const otherSession = (
      await cp.request('POST', '/v1/sessions', { token: other.token, body: { workspace: otherWs.slug } })
    ).body as Session;
    const [, , otherKeyId] = identifierParts(otherSession.caveat_token) as [string, string, string];

    // a session whose key is then rotated away and removed: its genuine token dies with the key
    const doomed = await newSession();
    expect((await present(doomed.caveat_token, 'rest', doomed.id)).status).toBe(200);
    const retired = (await cp.request('GET', '/v1/session-keys')).body.keys as { key_id: string }[];
    expect((await cp.request('POST', '/v1/session-keys/rotate')).status).toBe(201);
    for (const key of retired) expect((await cp.request('DELETE', `/v1/session-keys/${key.key_id}`)).status).toBe(204);
    // the key the first session's token names is gone too: mint the live one again under the new key
    session = await newSession();

    const signature = macaroonOf(doomed.caveat_token);
    signature[signature.length - 1]! ^= 1;
    const forged: Record<string, string> = {
      'a non-UUID organisation': withPart(doomed.caveat_token, 1, 'acme'),
      'a UUID-length non-UUID organisation': withPart(doomed.caveat_token, 1, 'zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz'),
      'an organisation in capitals': withPart(doomed.caveat_token, 1, organizationId.toUpperCase()),
      'an organisation that does not exist': withPart(doomed.caveat_token, 1, randomUUID()),
      'another real organisation': withPart(doomed.caveat_token, 1, other.id),
      'another organisation and its key': withIdentifier(doomed.caveat_token, [
        'ail1',
        other.id,
        otherKeyId,
        sessionId,
        'nonce',
      ]),
      'a key id of another shape': withPart(doomed.caveat_token, 2, 'sk1'),
      'a key that never existed': withPart(doomed.caveat_token, 2, 'sk-000000000000'),
      'a removed key': doomed.caveat_token,
      'a non-UUID session': withPart(session.caveat_token, 3, 'not-a-session'),
      'another session': withPart(session.caveat_token, 3, otherSession.id),
      'organisation and session swapped': withIdentifier(
        session.caveat_token,
        ((p) => [p[0]!, p[3]!, p[2]!, p[1]!, p[4]!])(identifierParts(session.caveat_token)),
      ),
      'another identifier version': withIdentifier(session.caveat_token, [
        'ail2',
        ...identifierParts(session.caveat_token).slice(1),
      ]),
      'a bad signature': tokenOf(signature),
      'not base64url': `${CAVEAT_TOKEN_PREFIX}%%%`,
      'nothing after the prefix': CAVEAT_TOKEN_PREFIX,
    };
    expect(keyId).not.toBe(identifierParts(session.caveat_token)[2]);

    const answers: Record<string, Answer> = {};
    for (const [what, token] of Object.entries(forged)) {
      for (const surface of SURFACES) answers[`${what} (${surface})`] = await present(token, surface);
    }
    const expected = {
      status: 401,
      code: 'TOKEN_INVALID',
      title: 'Unauthenticated',
      detail: answers['a bad signature (rest)']!.detail,
    };
    expect(answers).toEqual(Object.fromEntries(Object.keys(answers).map((what) => [what, expected])));
    expect(expected.detail).toEqual(expect.any(String));
    // nothing in the message tells an organisation or a key that exists from one that does not
    expect(expected.detail).not.toMatch(/key|organi[sz]ation|session|removed|exist/i);
    expect(loudLines(output.lines().slice(linesBefore))).toEqual([]);

    // the live session is untouched by all of it
    expect((await present(session.caveat_token, 'rest')).status).toBe(200);
  });

  it('property: thousands of mutated tokens on REST and /mcp are each one 401 TOKEN_INVALID with one message, never a 500, never a warn or error log line', async () => {
    const linesBefore = output.lines().length;
    const genuine = session.caveat_token;
    const original = macaroonOf(genuine);
    const parts = identifierParts(genuine);
    const reference = await present(
      tokenOf(Buffer.concat([original.subarray(0, -1), Buffer.from([original.at(-1)! ^ 0x80])])),
      'rest',
    );
    expect(reference).toMatchObject({ status: 401, code: 'TOKEN_INVALID' });

    const at = (n: number, length: number) => n % Math.max(length, 1);
    const b64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'.split('');
    const idLike = fc.oneof(
      fc.uuid(),
      fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,36}$/),
      fc.hexaString({ minLength: 12, maxLength: 12 }).map((hex) => `sk-${hex}`),
      fc.constantFrom(...parts.slice(1, 4), parts[1]!.toUpperCase()),
    );
    // each mutation of the genuine token, by what an attacker would try
    const mutated: fc.Arbitrary<string> = fc.oneof(
      // flip a bit
      fc.tuple(fc.nat(), fc.integer({ min: 0, max: 7 })).map(([i, bit]) => {
        const bytes = Buffer.from(original);
        bytes[at(i, bytes.length)]! ^= 1 << bit;
        return tokenOf(bytes);
      }),
      // overwrite a byte
      fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })).map(([i, value]) => {
        const bytes = Buffer.from(original);
        bytes[at(i, bytes.length)] = value;
        return tokenOf(bytes);
      }),
      // cut short
      fc.nat().map((n) => tokenOf(original.subarray(0, at(n, original.length)))),
      // insert bytes
      fc.tuple(fc.nat(), fc.uint8Array({ minLength: 1, maxLength: 8 })).map(([i, inserted]) => {
        const cut = at(i, original.length + 1);
        return tokenOf(Buffer.concat([original.subarray(0, cut), inserted, original.subarray(cut)]));
      }),
      // swap two bytes
      fc.tuple(fc.nat(), fc.nat()).map(([i, j]) => {
        const bytes = Buffer.from(original);
        const [a, b] = [at(i, bytes.length), at(j, bytes.length)];
        [bytes[a], bytes[b]] = [bytes[b]!, bytes[a]!];
        return tokenOf(bytes);
      }),
      // swap two fields of the identifier
      fc.tuple(fc.integer({ min: 0, max: 4 }), fc.integer({ min: 0, max: 4 })).map(([i, j]) => {
        const swapped = [...parts];
        [swapped[i], swapped[j]] = [swapped[j]!, swapped[i]!];
        return withIdentifier(genuine, swapped);
      }),
      // name another organisation, key or session, well formed or not
      fc.tuple(fc.constantFrom<1 | 2 | 3>(1, 2, 3), idLike).map(([index, value]) => withPart(genuine, index, value)),
      // base64url garbage, and printable garbage
      fc.string({ unit: fc.constantFrom(...b64), maxLength: 600 }).map((body) => CAVEAT_TOKEN_PREFIX + body),
      fc
        .string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 300 })
        .map((body) => CAVEAT_TOKEN_PREFIX + body),
      // far past any token's size, padded or random
      fc.integer({ min: 9_000, max: 12_000 }).map((n) => genuine + 'A'.repeat(n)),
      fc.integer({ min: 9_000, max: 12_000 }).map((n) => tokenOf(Buffer.alloc(n, 0x02))),
    );

    const seen = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(mutated, fc.constantFrom(...SURFACES), async (token, surface) => {
        fc.pre(token !== genuine);
        const answer = await present(token, surface);
        seen.set(surface, (seen.get(surface) ?? 0) + 1);
        expect(answer, `${surface}: ${token.slice(0, 200)}`).toEqual(reference);
      }),
      // 1,200 a backend, each its own seed: the two together try 2,400 different tokens
      { numRuns: RUNS, seed: backend === 'pglite' ? 29 : 31 },
    );
    for (const surface of SURFACES) expect(seen.get(surface), surface).toBeGreaterThan(RUNS / SURFACES.length / 2);

    const lines = output.lines().slice(linesBefore);
    // the positive control: the capture saw the refusals' request lines
    expect(lines.filter((line) => line.includes('"status":401')).length).toBeGreaterThan(RUNS * 0.8);
    expect(loudLines(lines)).toEqual([]);
  }, 300_000);
});
