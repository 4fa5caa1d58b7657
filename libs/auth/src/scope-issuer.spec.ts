import { describe, expect, it } from 'vitest';
import { EmptyWorkspaceSlugError, SystemScopes } from './scope-issuer';

describe('SystemScopes.workspace', () => {
  it('does not compile with an empty slug written in the code', () => {
    // `npm run lint` type-checks this file: were an empty slug to compile, the directive below would be unused, an error
    const written = () =>
      // @ts-expect-error an empty slug literal is refused by the type of `workspace`'s argument
      SystemScopes.workspace('org', { id: '4b1f0c8e-0000-4000-8000-000000000001', slug: '' });
    expect(written).toThrow(EmptyWorkspaceSlugError);
  });

  it('refuses a workspace without its slug, even when the type system could not see it coming', () => {
    const fromSomewhere = JSON.parse('{"id":"4b1f0c8e-0000-4000-8000-000000000001","slug":""}') as {
      id: string;
      slug: string;
    };
    expect(() => SystemScopes.workspace('org', fromSomewhere)).toThrow(EmptyWorkspaceSlugError);
  });

  it('names the workspace by id and slug', () => {
    const scope = SystemScopes.workspace('org', { id: 'ws-id', slug: 'payments' }, 'member');
    expect({ ...scope }).toEqual({
      organizationId: 'org',
      workspaceId: 'ws-id',
      workspaceSlug: 'payments',
      role: 'member',
    });
  });
});
