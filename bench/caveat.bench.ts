import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { CaveatTokenVerifier, deriveKey, mintCaveatToken, peekIdentity, verifyCaveatToken } from '../libs/sessions/src';
import { Bench, Figure, figure, note, percentile } from './figures';

const NAME = 'caveat';
/** verifications per timed sample: long enough that hrtime's own cost fades, short enough to see tails */
const BATCH = 20;
const WARMUP_BATCHES = 2_000;
const SAMPLES = 20_000;
const TOKENS = 64;
/** the mutation fuzz the bench run adds to the 50,000 of `npm test` */
const FUZZ = 1_000_000;

type Batch = (offset: number) => number;

function timed(batch: Batch, samples: number): Float64Array {
  const times = new Float64Array(samples);
  let sink = 0;
  for (let i = 0; i < samples; i++) {
    const started = process.hrtime.bigint();
    sink += batch(i * BATCH);
    times[i] = Number(process.hrtime.bigint() - started) / BATCH;
  }
  if (sink < 0) note('unreachable');
  return times;
}

/**
 * A token with six caveats (session, workspace, caps, expiry, servers,
 * tools), as a gateway-started session narrowed to one server would carry.
 * The baseline is one HMAC-SHA256 verify of the same bytes. Two figures: the
 * first use of a token on a replica (the whole chain), and every later use
 * (what the request path pays: the verifier remembers tokens whose chain held).
 */
async function run(): Promise<Figure[]> {
  const derived = deriveKey(randomBytes(32));
  const organizationId = randomUUID();
  const expires = Math.floor(Date.now() / 1000) + 3600;
  const tokens = Array.from({ length: TOKENS }, () =>
    mintCaveatToken(derived, { organizationId, keyId: 'sk-000000000000', sessionId: randomUUID() }, [
      { kind: 'workspace', id: randomUUID() },
      { kind: 'caps', caps: ['actions:list', 'actions:run', 'approvals:poll', 'comms'] },
      { kind: 'expires', at: expires },
      { kind: 'servers', names: ['github', 'linear'] },
      { kind: 'tools', globs: ['github__*', 'linear__list_*'] },
    ]),
  );
  // mint adds the session caveat: six in all
  const parsed = tokens.map((t) => peekIdentity(t));
  if (parsed[0]!.macaroon.caveats.length !== 6)
    throw new Error(`bench tokens must carry 6 caveats, not ${parsed[0]!.macaroon.caveats.length}`);
  const now = Math.floor(Date.now() / 1000);
  const verifier = new CaveatTokenVerifier(async () => derived);
  for (const token of tokens) await verifier.verify(token, now);

  const hmacKey = randomBytes(32);
  const expected = tokens.map((t) => createHmac('sha256', hmacKey).update(t).digest());
  const hmac: Batch = (offset) => {
    let ok = 0;
    for (let i = 0; i < BATCH; i++) {
      const at = (offset + i) % TOKENS;
      if (timingSafeEqual(createHmac('sha256', hmacKey).update(tokens[at]!).digest(), expected[at]!)) ok++;
    }
    return ok;
  };
  const cold: Batch = (offset) => {
    let ok = 0;
    for (let i = 0; i < BATCH; i++) {
      const { identity, macaroon } = peekIdentity(tokens[(offset + i) % TOKENS]!);
      if (verifyCaveatToken(macaroon, identity, derived, now).caps.size > 0) ok++;
    }
    return ok;
  };
  const warm: Batch = (offset) => {
    let ok = 0;
    for (let i = 0; i < BATCH; i++) if (verifier.known(tokens[(offset + i) % TOKENS]!, now)) ok++;
    return ok;
  };
  for (let i = 0; i < WARMUP_BATCHES; i++) {
    hmac(i);
    cold(i);
    warm(i);
  }
  // interleaved rounds so a noisy neighbour hits all three alike
  const rounds = 5;
  const parts = { hmac: [] as Float64Array[], cold: [] as Float64Array[], warm: [] as Float64Array[] };
  for (let r = 0; r < rounds; r++) {
    parts.hmac.push(timed(hmac, SAMPLES / rounds));
    parts.cold.push(timed(cold, SAMPLES / rounds));
    parts.warm.push(timed(warm, SAMPLES / rounds));
  }
  const p99 = (arrays: Float64Array[]) => percentile(Float64Array.from(arrays.flatMap((a) => Array.from(a))), 99);
  const baseline = {
    what: `p99 HMAC-SHA256 verify of the same token bytes (${tokens[0]!.length} bytes)`,
    value: p99(parts.hmac),
    unit: 'ns',
  };

  note(`  mutation fuzz: ${FUZZ.toLocaleString('en')} mutated tokens…`);
  const accepted = fuzz(tokens[0]!, derived, now);
  return [
    figure({
      bench: NAME,
      figure: 'p99 verify of a 6-caveat token, every use after the first on a replica',
      value: p99(parts.warm),
      baseline,
      goal: 2,
      better: 'lower',
    }),
    figure({
      bench: NAME,
      figure: 'p99 verify of a 6-caveat token, first use on a replica (the whole chain)',
      value: p99(parts.cold),
      baseline,
      goal: 10,
      better: 'lower',
    }),
    // a ratio of 1 means every mutation was refused
    figure({
      bench: NAME,
      figure: 'mutated tokens refused',
      value: FUZZ - accepted,
      baseline: { what: 'mutated tokens tried', value: FUZZ, unit: 'tokens' },
      goal: 1,
      better: 'higher',
    }),
  ];
}

/** Flips, drops and inserts bytes of a valid token's binary form; none may verify. */
function fuzz(token: string, derived: Buffer, now: number): number {
  const bytes = Buffer.from(token.slice('ail_ct_'.length), 'base64url');
  let accepted = 0;
  let seed = 0x5eed;
  const next = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
  for (let i = 0; i < FUZZ; i++) {
    const copy = Buffer.from(bytes);
    const at = next() % copy.length;
    const mode = next() % 3;
    let mutated: Buffer;
    if (mode === 0) {
      copy[at] = copy[at]! ^ (1 + (next() % 255));
      mutated = copy;
    } else if (mode === 1) mutated = Buffer.concat([copy.subarray(0, at), copy.subarray(at + 1)]);
    else mutated = Buffer.concat([copy.subarray(0, at), Buffer.from([next() % 256]), copy.subarray(at)]);
    try {
      const { identity, macaroon } = peekIdentity(`ail_ct_${mutated.toString('base64url')}`);
      verifyCaveatToken(macaroon, identity, derived, now);
      accepted++;
    } catch {
      // refused, as it must be
    }
  }
  return accepted;
}

export const caveatBench: Bench = {
  name: NAME,
  summary: 'session caveat token verify vs one HMAC-SHA256; 1,000,000 mutated tokens',
  run,
};
