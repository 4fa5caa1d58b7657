import { describe, expect, it } from 'vitest';
import { connectUrl, personOf, problemMessage, refreshDue, stateOf, subjectFor } from './connection';

const ANN = 'user:0b6f3c1e-5d2a-4f7e-9a1b-2c3d4e5f6a7b';

describe('whose connection a call uses', () => {
  it('a person’s own for per_person servers, the workspace’s for per_workspace ones', () => {
    expect(subjectFor('per_person', ANN)).toBe(ANN);
    expect(subjectFor('per_workspace', ANN)).toBe('workspace');
    expect(subjectFor('per_workspace', 'gateway:0b6f3c1e-5d2a-4f7e-9a1b-2c3d4e5f6a7b')).toBe('workspace');
  });
  it('no one’s for a caller that is no person: an API token, a gateway, or what looks like a person but is not', () => {
    for (const requester of [
      'token:0b6f3c1e-5d2a-4f7e-9a1b-2c3d4e5f6a7b',
      'gateway:0b6f3c1e-5d2a-4f7e-9a1b-2c3d4e5f6a7b',
      'user:',
      'user:workspace',
      `${ANN} `,
      `x${ANN}`,
    ]) {
      expect(personOf(requester), requester).toBeNull();
      expect(subjectFor('per_person', requester), requester).toBeNull();
    }
  });
});

describe('a connection’s state', () => {
  const now = Date.parse('2030-01-01T00:00:00Z');
  it('needs a reconnect once refused, expires without a refresh token, else is connected', () => {
    const past = new Date(now - 1);
    expect(stateOf({ state: 'needs_reconnect', accessExpiresAt: null, hasRefreshToken: true }, now)).toBe(
      'needs_reconnect',
    );
    expect(stateOf({ state: 'connected', accessExpiresAt: past, hasRefreshToken: false }, now)).toBe('expired');
    expect(stateOf({ state: 'connected', accessExpiresAt: past, hasRefreshToken: true }, now)).toBe('connected');
    expect(stateOf({ state: 'connected', accessExpiresAt: null, hasRefreshToken: false }, now)).toBe('connected');
  });
  it('is renewed within a minute of its expiry, or a tenth of a short lifetime, never for a token without one', () => {
    const at = (ms: number) => new Date(now + ms);
    expect(refreshDue(at(61_000), 3600, now)).toBe(false);
    expect(refreshDue(at(59_000), 3600, now)).toBe(true);
    expect(refreshDue(at(13_000), 120, now)).toBe(false);
    expect(refreshDue(at(11_000), 120, now)).toBe(true);
    expect(refreshDue(null, null, now)).toBe(false);
  });
});

describe('what a caller without a token is told', () => {
  const url = connectUrl('https://aileron.example.com', 'team-a', 'github');
  it('names who must connect and where', () => {
    expect(url).toBe('https://aileron.example.com/oauth/connections/connect?workspace=team-a&server=github');
    const context = { server: 'github', workspace: 'team-a', url, caller: 'Ann' };
    expect(problemMessage('CONNECTION_REQUIRED', { ...context, mode: 'per_person' })).toBe(
      `github needs an OAuth connection before it can be used: you (Ann) must connect your own account, in a browser, at ${url}`,
    );
    expect(problemMessage('CONNECTION_NEEDS_RECONNECT', { ...context, mode: 'per_workspace' })).toBe(
      `github no longer accepts the workspace's connection (it was revoked or has expired): an admin of workspace team-a must connect it again for everyone, in a browser, at ${url}`,
    );
    expect(problemMessage('CONNECTION_NEEDS_RECONNECT', { ...context, mode: 'per_person' })).toContain(
      'you (Ann) must connect your own account again, in a browser',
    );
    expect(
      problemMessage('CONNECTION_PERSON_REQUIRED', { ...context, mode: 'per_person', caller: 'API token ci' }),
    ).toMatch(/comes from API token ci, which is no person/);
  });
});
