import { describe, expect, it } from 'vitest';
import { addressedTo, EVENT_FILTER, matchesEvent, matchesWorkspace, takesPersonalNotification } from './event-filter';

describe('event filters', () => {
  it('an empty filter takes every event', () => {
    expect(matchesEvent([], 'policy.updated')).toBe(true);
  });

  it('matches exact types and whole domains, nothing in between', () => {
    expect(matchesEvent(['approval.*'], 'approval.requested')).toBe(true);
    expect(matchesEvent(['approval.*'], 'policy.updated')).toBe(false);
    // a domain wildcard is not a prefix match on the domain name
    expect(matchesEvent(['approval.*'], 'approvals.requested')).toBe(false);
    expect(matchesEvent(['policy.updated'], 'policy.updated')).toBe(true);
    expect(matchesEvent(['policy.updated'], 'policy.updated_again')).toBe(false);
    expect(matchesEvent(['secret.read', 'approval.*'], 'secret.read')).toBe(true);
  });

  it('accepts only types and domain wildcards as filter entries', () => {
    for (const good of ['policy.updated', 'approval.*', 'audit.sink_created', 'catalog.version_published'])
      expect(EVENT_FILTER.test(good), good).toBe(true);
    for (const bad of ['*', 'policy', 'policy.*.x', '*.updated', 'Policy.Updated', 'approval.re*', '.x', 'a.'])
      expect(EVENT_FILTER.test(bad), bad).toBe(false);
  });

  it('a workspace filter of null takes events of every workspace and of the organisation', () => {
    expect(matchesWorkspace(null, 'ws-1')).toBe(true);
    expect(matchesWorkspace(null, null)).toBe(true);
    expect(matchesWorkspace('ws-1', 'ws-1')).toBe(true);
    expect(matchesWorkspace('ws-1', 'ws-2')).toBe(false);
    expect(matchesWorkspace('ws-1', null)).toBe(false);
  });
});

describe('personal notifications (a one-time link for one person)', () => {
  it('go only to json endpoints that name the type exactly: never through a wildcard, an empty filter or to a Slack channel', () => {
    expect(takesPersonalNotification({ events: ['approval.link'], format: 'json' }, 'approval.link')).toBe(true);
    expect(takesPersonalNotification({ events: ['approval.*'], format: 'json' }, 'approval.link')).toBe(false);
    expect(takesPersonalNotification({ events: [], format: 'json' }, 'approval.link')).toBe(false);
    expect(takesPersonalNotification({ events: ['approval.link'], format: 'slack' }, 'approval.link')).toBe(false);
  });
});

describe('directed messages', () => {
  it('go to the endpoints they name in channels, and only by their exact name', () => {
    const payload = { channels: ['cost-approvals', 'finance-bot'] };
    expect(addressedTo(payload, 'cost-approvals')).toBe(true);
    expect(addressedTo(payload, 'cost')).toBe(false);
    expect(addressedTo({}, 'cost-approvals')).toBe(false);
    expect(addressedTo({ channels: 'cost-approvals' }, 'cost-approvals')).toBe(false);
  });
});
