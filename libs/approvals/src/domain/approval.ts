import { digestOf } from '@aileron/crypto';

export type ApprovalStatus = 'pending' | 'approved' | 'denied' | 'expired' | 'cancelled';
export const FINAL: readonly ApprovalStatus[] = ['approved', 'denied', 'expired', 'cancelled'];

/** What an approval binds: the exact arguments, by the digest of their canonical JSON. */
export function argumentsDigest(args: Record<string, unknown> | undefined): string {
  return digestOf(args ?? {});
}

/** Argument names that are credentials whatever the policy says. */
const ALWAYS_REDACTED = /pass(word|phrase)?|secret|token|api[_-]?key|private[_-]?key|credential|authorization|cookie/i;
export const REDACTED = '[redacted]';

/**
 * The arguments as approvers see them: values under credential-like names and
 * under the policy's `redact` paths (`repo.token`, `headers`) are replaced.
 * The digest is over the full arguments; only the display is redacted.
 */
export function redactArguments(
  args: Record<string, unknown> | undefined,
  paths: readonly string[] = [],
): Record<string, unknown> {
  const wanted = new Set(paths);
  const walk = (value: unknown, path: string): unknown => {
    if (Array.isArray(value)) return value.map((v, i) => walk(v, `${path}[${i}]`));
    if (value === null || typeof value !== 'object') return value;
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value)) {
      const at = path ? `${path}.${key}` : key;
      out[key] = ALWAYS_REDACTED.test(key) || wanted.has(at) ? REDACTED : walk(v, at);
    }
    return out;
  };
  return walk(args ?? {}, '') as Record<string, unknown>;
}

export interface Vote {
  approver: string;
  decision: 'approve' | 'deny';
}

/** Any deny ends it; `quorum` different approvers approving approves it. */
export function tally(votes: readonly Vote[], quorum: number): 'approved' | 'denied' | 'pending' {
  if (votes.some((v) => v.decision === 'deny')) return 'denied';
  return new Set(votes.filter((v) => v.decision === 'approve').map((v) => v.approver)).size >= quorum
    ? 'approved'
    : 'pending';
}

/**
 * The identities a caller acts as. The requester can never approve their own
 * request, whichever of these names the request carries (a gateway reports
 * the person by e-mail or `user:<id>`; a token acts for whoever made it).
 */
export function identitiesOf(caller: {
  kind: string;
  id: string;
  email?: string | null;
  createdBy?: string | null;
}): Set<string> {
  const ids = new Set<string>([`${caller.kind === 'api_token' ? 'token' : caller.kind}:${caller.id}`, caller.id]);
  if (caller.email) {
    ids.add(caller.email.toLowerCase());
    ids.add(`user:${caller.email.toLowerCase()}`);
  }
  if (caller.createdBy) ids.add(caller.createdBy);
  return ids;
}

/**
 * The names of the person behind a principal: each ref along a token's chain
 * of creators (a token counts as whoever made it, and so on up), and the user
 * the chain ends at. A requester that is no ref at all (a gateway reports the
 * person by e-mail) names only itself.
 */
export function personIdentities(
  requester: string,
  chain: readonly string[],
  user: { id: string; email: string | null } | null,
): Set<string> {
  const ids = new Set<string>([requester, requester.toLowerCase(), `user:${requester.toLowerCase()}`]);
  for (const ref of chain) {
    ids.add(ref);
    ids.add(ref.slice(ref.indexOf(':') + 1));
  }
  if (user) for (const id of identitiesOf({ kind: 'user', id: user.id, email: user.email })) ids.add(id);
  return ids;
}

/** Separation of duties: any name in common means the same person on both sides. */
export function samePerson(requester: ReadonlySet<string>, approver: ReadonlySet<string>): boolean {
  for (const id of requester) if (approver.has(id)) return true;
  return false;
}
