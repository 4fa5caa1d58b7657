import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { GatewayIdentity, Rollout, rolloutBucket, versionFor } from './rollout';

function rollout(overrides: Partial<Rollout> = {}): Rollout {
  return { version: '2.0.0', gateways: [], groups: [], percent: 0, ...overrides };
}

function gateway(overrides: Partial<GatewayIdentity> = {}): GatewayIdentity {
  return { id: randomUUID(), name: 'laptop', groups: [], ...overrides };
}

const gateways = Array.from({ length: 10_000 }, () => gateway());

function onNewVersion(percent: number, server = 'github'): Set<string> {
  return new Set(
    gateways.filter((g) => versionFor('1.0.0', rollout({ percent }), g, server) === '2.0.0').map((g) => g.id),
  );
}

describe('rollout', () => {
  it('buckets are stable and within 0..9999', () => {
    const id = randomUUID();
    expect(rolloutBucket(id, 'github')).toBe(rolloutBucket(id, 'github'));
    for (const g of gateways.slice(0, 1000)) {
      const bucket = rolloutBucket(g.id, 'github');
      expect(Number.isInteger(bucket) && bucket >= 0 && bucket < 10_000).toBe(true);
    }
  });

  it('named gateways (by id or name) and group members get the new version at 0 %', () => {
    const canary = gateway({ name: 'ci-runner-1', groups: ['platform'] });
    expect(versionFor('1.0.0', rollout({ gateways: [canary.id] }), canary, 'github')).toBe('2.0.0');
    expect(versionFor('1.0.0', rollout({ gateways: ['ci-runner-1'] }), canary, 'github')).toBe('2.0.0');
    expect(versionFor('1.0.0', rollout({ groups: ['sre', 'platform'] }), canary, 'github')).toBe('2.0.0');
    expect(versionFor('1.0.0', rollout({ groups: ['sre'], gateways: ['other'] }), canary, 'github')).toBe('1.0.0');
  });

  it('no rollout, or no gateway (an API caller), means the pinned version', () => {
    expect(versionFor('1.0.0', null, gateway(), 'github')).toBe('1.0.0');
    expect(versionFor('1.0.0', rollout({ percent: 100, groups: ['all'] }), null, 'github')).toBe('1.0.0');
  });

  it('0 % reaches nobody and 100 % everybody', () => {
    expect(onNewVersion(0).size).toBe(0);
    expect(onNewVersion(100).size).toBe(gateways.length);
  });

  it('raising the percent only adds gateways', () => {
    let previous = onNewVersion(0);
    for (const percent of [0.5, 1, 5, 10, 25, 33.33, 50, 75, 99, 100]) {
      const current = onNewVersion(percent);
      for (const id of previous) expect(current.has(id)).toBe(true);
      previous = current;
    }
  });

  it('reaches the requested share of 10,000 random gateways within 3 points', () => {
    for (const percent of [1, 10, 25, 50, 90]) {
      const share = (onNewVersion(percent).size / gateways.length) * 100;
      expect(Math.abs(share - percent)).toBeLessThanOrEqual(3);
    }
  });

  it('each server has its own order, so the same gateways are not always first', () => {
    const github = onNewVersion(10, 'github');
    const jira = onNewVersion(10, 'jira');
    const both = [...github].filter((id) => jira.has(id)).length;
    // independent orders overlap on about 10 % of 10 % of gateways (100); the same order would give 1000
    expect(both).toBeLessThan(200);
  });
});
