import { describe, expect, it } from 'vitest';
import { checkRouting, isApprover, routingDocumentSchema } from './routing';

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
