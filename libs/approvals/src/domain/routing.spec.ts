import { describe, expect, it } from 'vitest';
import { channelNames, checkChannels, checkRouting, isApprover, routingDocumentSchema } from './routing';

const NOW = new Date('2026-11-23T12:00:00Z');
const document = routingDocumentSchema.parse({
  routes: { release: { approvers: [{ group: 'release-managers' }] } },
  groups: { 'release-managers': ['listed@example.com'] },
});
const route = document.routes.release!;
const person = (overrides: Partial<Parameters<typeof isApprover>[2]> = {}) => ({
  userId: 'u-1',
  email: 'someone@example.com',
  role: 'member',
  idpGroups: [] as string[],
  ...overrides,
});

describe('groups in approval routes', () => {
  it('admit the people the document lists and, as well, anyone whose IdP groups name the group', () => {
    expect(isApprover(document, route, person({ email: 'listed@example.com' }), NOW)).toBe(true);
    expect(isApprover(document, route, person({ idpGroups: ['engineering', 'release-managers'] }), NOW)).toBe(true);
    expect(isApprover(document, route, person({ idpGroups: ['engineering'] }), NOW)).toBe(false);
    expect(isApprover(document, route, person(), NOW)).toBe(false);
  });

  it('match IdP group names without case, and only for a person (never a bare token)', () => {
    expect(isApprover(document, route, person({ idpGroups: ['Release-Managers'] }), NOW)).toBe(true);
    expect(isApprover(document, route, person({ idpGroups: ['release-managers-eu'] }), NOW)).toBe(false);
    expect(
      isApprover(document, route, person({ userId: null, email: null, idpGroups: ['release-managers'] }), NOW),
    ).toBe(false);
  });

  it('must be declared in the document, an empty list when the IdP supplies the members: a typo stays an error', () => {
    const idpOnly = routingDocumentSchema.parse({
      routes: { release: { approvers: [{ group: 'release-managers' }] } },
      groups: { 'release-managers': [] },
    });
    expect(checkRouting(idpOnly)).toEqual([]);
    const typo = routingDocumentSchema.parse({
      routes: { release: { approvers: [{ group: 'release-manager' }] } },
      groups: { 'release-managers': [] },
    });
    expect(checkRouting(typo)).toEqual([
      { path: 'routes.release.approvers[0].group', message: expect.stringContaining('"release-manager"') },
    ]);
  });
});

describe('channels in approval routes', () => {
  const routed = routingDocumentSchema.parse({
    routes: {
      'cost-approval': {
        approvers: [{ role: 'approver' }],
        channels: [{ webhook: 'cost-approvals' }, { webhook: 'finance-bot' }, { webhook: 'cost-approvals' }],
      },
      security: { approvers: [{ role: 'admin' }], channels: [{ webhook: 'payments-only' }] },
    },
  });

  it('name endpoints of the organisation that carry the workspace’s events', () => {
    const endpoints = [
      { name: 'cost-approvals', workspaceId: null },
      { name: 'finance-bot', workspaceId: 'ws-1' },
      { name: 'payments-only', workspaceId: 'ws-2' },
    ];
    expect(checkChannels(routed, endpoints, 'ws-1')).toEqual([
      { path: 'routes.security.channels[0].webhook', message: expect.stringContaining("another workspace's") },
    ]);
    expect(checkChannels(routed, endpoints.slice(1), 'ws-2')).toEqual([
      { path: 'routes.cost-approval.channels[0].webhook', message: expect.stringContaining('"cost-approvals"') },
      { path: 'routes.cost-approval.channels[1].webhook', message: expect.stringContaining("another workspace's") },
      { path: 'routes.cost-approval.channels[2].webhook', message: expect.stringContaining('"cost-approvals"') },
    ]);
  });

  it('are announced to once each; a route saved before channels existed has none', () => {
    expect(channelNames(routed.routes['cost-approval']!)).toEqual(['cost-approvals', 'finance-bot']);
    expect(channelNames({ approvers: [{ role: 'admin' }], quorum: 1, expires_in_seconds: 60 })).toEqual([]);
  });

  it('are endpoints by name only: a URL in the document is refused', () => {
    const parsed = routingDocumentSchema.safeParse({
      routes: { r: { approvers: [{ role: 'admin' }], channels: [{ url: 'https://hooks.slack.com/services/x' }] } },
    });
    expect(parsed.success).toBe(false);
  });
});
