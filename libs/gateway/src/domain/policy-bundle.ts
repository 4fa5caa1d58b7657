import { canonicalJson, publicKeyFromX, verifyEd25519 } from '@aileron/crypto';

export const OFFLINE_MODES = ['fail_closed', 'fail_open', 'cached'] as const;
export type OfflineMode = (typeof OFFLINE_MODES)[number];

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
  /** what to decide once expires_at passes without a fresh bundle */
  offline_mode: OfflineMode;
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
  { ok: true } | { ok: false; reason: 'UNKNOWN_KEY' | 'BAD_SIGNATURE' | 'EXPIRED' | 'ROLLED_BACK' };

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
