import { describe, expect, it } from 'vitest';
import { hashToken, looksLikeApiToken, mintApiToken } from './api-token';
import { mapClaims } from './claims';
import { Principal, roleIn } from './principal';
import { allows, canGrant } from './roles';

const mapping = {
  subjectClaim: 'sub',
  emailClaim: 'email',
  nameClaim: 'name',
  roleClaim: 'realm.roles',
  roleMapping: { 'sec-team': 'admin' as const },
  defaultRole: 'member' as const,
  groupsClaim: 'groups',
};

function principal(overrides: Partial<Principal>): Principal {
  return {
    kind: 'user',
    id: 'u',
    name: 'u',
    organizationId: 'o',
    organizationSlug: 'o',
    orgRole: 'member',
    workspaceRoles: new Map(),
    restrictedToWorkspaceId: null,
    platformOperator: false,
    ...overrides,
  };
}

describe('API tokens', () => {
  it('are random, recognisable, and stored only as a hash', () => {
    const a = mintApiToken();
    const b = mintApiToken();
    expect(a.token).not.toBe(b.token);
    expect(looksLikeApiToken(a.token)).toBe(true);
    expect(looksLikeApiToken(a.token + 'x')).toBe(false);
    expect(a.hash).toBe(hashToken(a.token));
    expect(a.hash).not.toContain(a.token.slice(8));
    expect(a.displayPrefix).toBe(a.token.slice(0, 12));
  });
});

describe('roles', () => {
  it('nobody grants above their own role', () => {
    expect(canGrant('owner', 'owner')).toBe(true);
    expect(canGrant('admin', 'owner')).toBe(false);
    expect(canGrant('admin', 'auditor')).toBe(true);
    expect(canGrant('member', 'admin')).toBe(false);
  });

  it('auditors read but never change; unknown roles get nothing', () => {
    expect(allows('auditor', 'token.read')).toBe(true);
    expect(allows('auditor', 'token.create')).toBe(false);
    expect(allows(null, 'workspace.read')).toBe(false);
  });

  it('owner, admin and auditor reach every workspace; others need a membership; restricted tokens reach one', () => {
    expect(roleIn(principal({ orgRole: 'admin' }), 'w1')).toBe('admin');
    expect(roleIn(principal({ orgRole: 'member' }), 'w1')).toBeNull();
    expect(roleIn(principal({ orgRole: 'member', workspaceRoles: new Map([['w1', 'approver']]) }), 'w1')).toBe(
      'approver',
    );
    const restricted = principal({
      kind: 'api_token',
      orgRole: null,
      restrictedToWorkspaceId: 'w1',
      workspaceRoles: new Map([['w1', 'admin']]),
    });
    expect(roleIn(restricted, 'w1')).toBe('admin');
    expect(roleIn(restricted, 'w2')).toBeNull();
  });
});

describe('claim mapping', () => {
  it('takes the highest mapped role from a nested claim, else the default', () => {
    expect(mapClaims({ sub: 's', realm: { roles: ['dev', 'sec-team'] } }, mapping)?.role).toBe('admin');
    expect(mapClaims({ sub: 's', realm: { roles: ['dev'] } }, mapping)?.role).toBe('member');
    expect(mapClaims({ sub: 's', realm: { roles: 'auditor' } }, mapping)?.role).toBe('auditor');
    expect(mapClaims({ email: 'x@y' }, mapping)).toBeNull();
    expect(mapClaims({ sub: 's' }, { ...mapping, roleClaim: null })?.role).toBeNull();
  });

  it('reads groups from the configured claim: a list or one name, duplicates and non-names dropped', () => {
    expect(mapClaims({ sub: 's', groups: ['release', 'sre', 'release', 7, ''] }, mapping)?.groups).toEqual([
      'release',
      'sre',
    ]);
    expect(mapClaims({ sub: 's', groups: 'release' }, mapping)?.groups).toEqual(['release']);
    expect(
      mapClaims({ sub: 's', org: { teams: ['payments'] } }, { ...mapping, groupsClaim: 'org.teams' })?.groups,
    ).toEqual(['payments']);
    expect(mapClaims({ sub: 's' }, mapping)?.groups).toEqual([]);
    expect(mapClaims({ sub: 's', groups: { admin: true } }, mapping)?.groups).toEqual([]);
  });
});
