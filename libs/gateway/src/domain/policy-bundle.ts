import { canonicalJson, publicKeyFromX, verifyEd25519 } from '@aileron/crypto';

export const OFFLINE_MODES = ['fail_closed', 'fail_open', 'cached'] as const;
export type OfflineMode = (typeof OFFLINE_MODES)[number];

/** What a gateway does with a tool call: decide by the bundle's policy, or deny or allow it without looking. */
export type OfflineAction = 'enforce' | 'deny' | 'allow';

/**
 * The organisation's offline mode spelt out, so that no gateway has to know
 * what a mode's name means (docs/gateway.md § Offline). Until `valid_until`, a
 * gateway in contact with the control plane enforces the bundle, and one out
 * of contact does `while_unreachable`; from `valid_until` on, without a fresh
 * bundle, it does `after_expiry`, in contact or not. A bundle past
 * `valid_until` is never enforced.
 */
export interface OfflineRule {
  mode: OfflineMode;
  /** the bundle's `expires_at`: the last instant its policy may be enforced */
  valid_until: string;
  while_unreachable: OfflineAction;
  after_expiry: Exclude<OfflineAction, 'enforce'>;
}

const OFFLINE_ACTIONS: Record<OfflineMode, Pick<OfflineRule, 'while_unreachable' | 'after_expiry'>> = {
  // nothing runs on a policy the control plane cannot confirm is current
  fail_closed: { while_unreachable: 'deny', after_expiry: 'deny' },
  // the held bundle stands in while the control plane is away, for as long as it is valid, and no longer
  cached: { while_unreachable: 'enforce', after_expiry: 'deny' },
  // unblocking over safe: calls go ahead and are audited for review once the control plane is back
  fail_open: { while_unreachable: 'allow', after_expiry: 'allow' },
};

export function offlineRule(mode: OfflineMode, expiresAt: string): OfflineRule {
  return { mode, valid_until: expiresAt, ...OFFLINE_ACTIONS[mode] };
}

/**
 * The reference for what a gateway does with a call under the bundle it holds.
 * `inContact`: its latest request for the policy was answered (200 with a
 * bundle that verified, or 304); false from a request that got no answer, an
 * error status or a bundle that did not verify, until one is answered again.
 */
export function offlineAction(rule: OfflineRule, now: Date, inContact: boolean): OfflineAction {
  if (Date.parse(rule.valid_until) <= now.getTime()) return rule.after_expiry;
  return inContact ? 'enforce' : rule.while_unreachable;
}

/** A local server whose gateway must ask for secret values before it starts it: the paths, never a value. */
export interface SecretNeed {
  server: string;
  /** the catalog version that names them: the pinned one, or a rollout's */
  version: string;
  paths: string[];
}

/**
 * What a gateway enforces and may verify offline. `version` is the policy
 * version and never goes backwards; a gateway orders bundles by
 * (version, issued_at) and refuses older ones, so a replayed old bundle cannot
 * loosen its policy.
 */
export interface PolicyBundlePayload {
  type: 'aileron.policy-bundle.v1';
  organization: string;
  workspace: string;
  version: number;
  digest: string;
  issued_at: string;
  expires_at: string;
  max_stale_seconds: number;
  /** the organisation's mode by name, kept for gateways that predate `offline`; `offline` is what it means */
  offline_mode: OfflineMode;
  offline: OfflineRule;
  /**
   * The workspace's local servers (each version a gateway may be given) whose
   * env names `vault://` secrets: before starting one, its gateway asks
   * `POST /v1/gateway/secrets/resolve {server, version}` for the values.
   */
  needs_secrets: SecretNeed[];
  /** the document in force, with the workspace default filled in */
  policy: Record<string, unknown> & { default: 'allow' | 'deny'; on_error: 'deny' | 'approval'; rules: unknown[] };
}

export interface SignedPolicyBundle {
  payload: PolicyBundlePayload;
  signature: { alg: 'EdDSA'; kid: string; value: string };
}

/** The bytes that are signed: RFC 8785 canonical JSON of the payload. */
export function bundleSigningInput(payload: PolicyBundlePayload): string {
  return canonicalJson(payload);
}

export interface PublishedKey {
  kid: string;
  x: string;
}

export type BundleCheck =
  | { ok: true }
  | { ok: false; reason: 'UNKNOWN_KEY' | 'BAD_SIGNATURE' | 'EXPIRED' | 'ROLLED_BACK' };

/**
 * What a gateway does with a bundle, offline: signature by a published key,
 * not expired, not older than the one it holds. The gateway SDKs implement the
 * same; tests use this one.
 */
export function checkBundle(
  bundle: SignedPolicyBundle,
  keys: PublishedKey[],
  now: Date,
  held?: { version: number; issued_at: string },
): BundleCheck {
  const key = keys.find((k) => k.kid === bundle.signature.kid);
  if (!key) return { ok: false, reason: 'UNKNOWN_KEY' };
  if (
    bundle.signature.alg !== 'EdDSA' ||
    !verifyEd25519(publicKeyFromX(key.x), bundleSigningInput(bundle.payload), bundle.signature.value)
  ) {
    return { ok: false, reason: 'BAD_SIGNATURE' };
  }
  if (Date.parse(bundle.payload.expires_at) <= now.getTime()) return { ok: false, reason: 'EXPIRED' };
  if (
    held &&
    (bundle.payload.version < held.version ||
      (bundle.payload.version === held.version && bundle.payload.issued_at < held.issued_at))
  ) {
    return { ok: false, reason: 'ROLLED_BACK' };
  }
  return { ok: true };
}
