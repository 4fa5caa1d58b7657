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
export function redactArguments(args: Record<string, unknown> | undefined, paths: readonly string[] = []): Record<string, unknown> {
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
  return new Set(votes.filter((v) => v.decision === 'approve').map((v) => v.approver)).size >= quorum ? 'approved' : 'pending';
}

/**
 * The identities a caller acts as. The requester can never approve their own
 * request, whichever of these names the request carries (a gateway reports
 * the person by e-mail or `user:<id>`; a token acts for whoever made it).
 */
export function identitiesOf(caller: { kind: string; id: string; email?: string | null; createdBy?: string | null }): Set<string> {
  const ids = new Set<string>([`${caller.kind === 'api_token' ? 'token' : caller.kind}:${caller.id}`, caller.id]);
  if (caller.email) {
    ids.add(caller.email.toLowerCase());
    ids.add(`user:${caller.email.toLowerCase()}`);
  }
  if (caller.createdBy) ids.add(caller.createdBy);
  return ids;
}

export function sameRequester(requester: string, identities: Set<string>): boolean {
  const r = requester.toLowerCase();
  return identities.has(requester) || identities.has(r);
}
