import { createHash } from 'node:crypto';

/** A new version offered to part of a workspace before it is promoted to the pinned version. */
export interface Rollout {
  version: string;
  /** gateway ids or names that get the new version first */
  gateways: string[];
  groups: string[];
  /** 0..100, in steps of 0.01 */
  percent: number;
}

export interface GatewayIdentity {
  id: string;
  name: string;
  groups: string[];
}

export const ROLLOUT_BUCKETS = 10_000;

/**
 * A gateway's place in a server's rollout order, 0..9999. Salting with the
 * server name gives every server its own order, so the same gateways are not
 * always the first to meet a new version. Keyed by id, not name: renaming a
 * gateway must not move it in or out of a rollout.
 */
export function rolloutBucket(gatewayId: string, serverName: string): number {
  // 48 bits modulo 10,000: the bias is below one part in 10^10
  return createHash('sha256').update(`${serverName}:${gatewayId}`, 'utf8').digest().readUIntBE(0, 6) % ROLLOUT_BUCKETS;
}

/**
 * The version of `serverName` one gateway runs. It gets the rollout version
 * when it is named (by id or name), shares a group, or falls in the first
 * `percent` of buckets; otherwise the pinned version. The bucket test is
 * `bucket < percent * 100`, so raising the percent only ever adds gateways.
 * API callers (no gateway) always see the pinned version.
 */
export function versionFor(
  pinned: string,
  rollout: Rollout | null,
  gateway: GatewayIdentity | null,
  serverName: string,
): string {
  if (rollout === null || gateway === null) return pinned;
  if (rollout.gateways.includes(gateway.id) || rollout.gateways.includes(gateway.name)) return rollout.version;
  if (gateway.groups.some((group) => rollout.groups.includes(group))) return rollout.version;
  return rolloutBucket(gateway.id, serverName) < rollout.percent * 100 ? rollout.version : pinned;
}
