import { describe, expect, it } from 'vitest';
import { catalogEntryInput, compareVersions, isVersion, oauthOf, vaultReferences } from './catalog-entry';

function localStdio(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: 'github',
    version: '1.2.0',
    mode: 'local',
    transport: 'stdio',
    command: 'npx',
    args: ['-y', '@acme/github-mcp'],
    ...overrides,
  };
}

function remoteHttp(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: 'jira',
    version: '2.0.0',
    mode: 'remote',
    transport: 'streamable_http',
    url: 'https://jira-mcp.internal.example/mcp',
    ...overrides,
  };
}

/** The paths of every issue, as `a.b` strings, so a test states where the error points. */
function errorPaths(input: unknown): string[] {
  const result = catalogEntryInput.safeParse(input);
  return result.success ? [] : result.error.issues.map((issue) => issue.path.join('.')).sort();
}

describe('catalog entry: shape', () => {
  it('accepts the three ways to run a server and defaults overridable to none', () => {
    expect(catalogEntryInput.parse(localStdio()).overridable).toEqual([]);
    expect(catalogEntryInput.safeParse(remoteHttp()).success).toBe(true);
    expect(
      catalogEntryInput.safeParse(
        localStdio({ mode: 'remote', command: undefined, args: undefined, image: 'ghcr.io/acme/github-mcp:1.2.0' }),
      ).success,
    ).toBe(true);
    expect(catalogEntryInput.safeParse(remoteHttp({ mode: 'local' })).success).toBe(true);
  });

  it('the simple case is one stanza: mode left out is local, transport follows from command, image or url', () => {
    const stanza = catalogEntryInput.parse({
      name: 'github',
      version: '1.0.0',
      command: 'npx',
      args: ['-y', 'gh-mcp'],
    });
    expect(stanza).toMatchObject({ mode: 'local', transport: 'stdio' });
    expect(catalogEntryInput.parse({ name: 'jira', version: '1.0.0', url: 'https://jira.example/mcp' })).toMatchObject({
      mode: 'local',
      transport: 'streamable_http',
    });
    expect(
      catalogEntryInput.parse({ name: 'gh', version: '1.0.0', mode: 'remote', image: 'ghcr.io/acme/gh:1.0.0' }),
    ).toMatchObject({ mode: 'remote', transport: 'stdio' });
    // what is given is kept, and still checked against the rest
    expect(errorPaths({ name: 'x', version: '1.0.0', transport: 'streamable_http', command: 'npx' })).toEqual([
      'command',
      'url',
    ]);
    // nothing to run or reach: refused for the command it lacks; both: refused for giving both
    expect(errorPaths({ name: 'x', version: '1.0.0' })).toEqual(['command']);
    expect(errorPaths({ name: 'x', version: '1.0.0', command: 'npx', url: 'https://x.example/mcp' })).toEqual([
      'command',
      'url',
    ]);
  });

  it('names: lowercase, digits and "-", at most 32, never an underscore', () => {
    expect(errorPaths(localStdio({ name: 'a'.repeat(32) }))).toEqual([]);
    for (const name of ['a'.repeat(33), 'my_server', 'a__b', '-lead', 'GitHub', ''])
      expect(errorPaths(localStdio({ name }))).toEqual(['name']);
  });

  it('versions: semver with optional pre-release, no build metadata', () => {
    for (const version of ['0.0.1', '1.2.0', '1.2.0-rc.1', '10.20.30-alpha-1.0.x'])
      expect(errorPaths(localStdio({ version }))).toEqual([]);
    for (const version of ['1.2', 'v1.2.0', '01.2.0', '1.2.0+build.5', '1.2.0-', '1.2.0-01'])
      expect(errorPaths(localStdio({ version }))).toEqual(['version']);
  });

  it('refuses unknown fields, bad images and non-http URLs at their field', () => {
    expect(catalogEntryInput.safeParse(localStdio({ cwd: '/tmp' })).error?.issues[0]?.code).toBe('unrecognized_keys');
    expect(
      errorPaths(localStdio({ mode: 'remote', command: undefined, args: undefined, image: 'Not An Image' })),
    ).toEqual(['image']);
    expect(
      errorPaths(
        localStdio({
          mode: 'remote',
          command: undefined,
          args: undefined,
          image: 'registry:5000/a/b@sha256:' + 'a'.repeat(64),
        }),
      ),
    ).toEqual([]);
    expect(errorPaths(remoteHttp({ url: 'ftp://files.example/mcp' }))).toEqual(['url']);
    expect(errorPaths(remoteHttp({ url: 'https://user:secret@jira.example/mcp' }))).toEqual(['url']);
  });

  it('env names and header names are checked per key; tool prefixes cannot break the "__" split', () => {
    expect(errorPaths(localStdio({ env: { 'BAD-NAME': 'x', GOOD_NAME: 'y' } }))).toEqual(['env.BAD-NAME']);
    expect(errorPaths(remoteHttp({ headers: { 'Bad Header': 'x' } }))).toEqual(['headers.Bad Header']);
    expect(errorPaths(remoteHttp({ headers: { 'X-Api-Key': 'a\r\nInjected: 1' } }))).toEqual(['headers.X-Api-Key']);
    expect(errorPaths(localStdio({ tool_prefix: 'gh' }))).toEqual([]);
    for (const tool_prefix of ['a__b', 'gh_', 'Gh', 'a'.repeat(17)])
      expect(errorPaths(localStdio({ tool_prefix }))).toEqual(['tool_prefix']);
    expect(errorPaths(localStdio({ description: 'x'.repeat(1001) }))).toEqual(['description']);
  });
});

describe('catalog entry: cross-field rules point at the field', () => {
  it('exactly one of command, image, url, matching the transport', () => {
    expect(errorPaths(localStdio({ command: undefined, args: undefined }))).toEqual(['command']);
    expect(errorPaths(localStdio({ mode: 'remote', image: 'acme/x:1' }))).toEqual(['image']);
    expect(errorPaths(localStdio({ url: 'https://x.example/mcp' }))).toEqual(['url', 'url']);
    expect(errorPaths(remoteHttp({ url: undefined }))).toEqual(['url']);
    expect(errorPaths(remoteHttp({ url: undefined, command: 'node' }))).toEqual(['command', 'url']);
    expect(errorPaths(localStdio({ command: undefined, args: ['x'], mode: 'remote', image: 'acme/x:1' }))).toEqual([
      'args',
    ]);
    expect(errorPaths(localStdio({ headers: { A: 'b' } }))).toEqual(['headers']);
    expect(errorPaths(remoteHttp({ env: { A: 'b' } }))).toEqual(['env']);
  });

  it('a gateway does not run images', () => {
    expect(errorPaths(localStdio({ command: undefined, args: undefined, image: 'acme/x:1' }))).toEqual(['image']);
  });

  it("vault references in a local entry's env (its gateway asks for them), not in a local url's headers", () => {
    expect(errorPaths(remoteHttp({ headers: { Authorization: 'vault://jira/token' } }))).toEqual([]);
    const local = catalogEntryInput.parse(localStdio({ env: { GITHUB_TOKEN: 'vault://github/token', LOG: 'debug' } }));
    expect(local.env).toEqual({ GITHUB_TOKEN: 'vault://github/token', LOG: 'debug' });
    expect(vaultReferences(local)).toEqual(['github/token']);
    const result = catalogEntryInput.safeParse(
      remoteHttp({ mode: 'local', headers: { Authorization: 'vault://jira/token' } }),
    );
    expect(result.error?.issues.map((i) => i.path.join('.'))).toEqual(['headers.Authorization']);
    expect(result.error?.issues[0]?.message).toContain('mode remote');
  });

  it('vault references in a local entry cannot climb either', () => {
    for (const ref of ['vault://a/../b', 'vault://./a', 'vault://../etc/passwd', 'vault://a//b'])
      expect(errorPaths(localStdio({ env: { TOKEN: ref } }))).toEqual(['env.TOKEN']);
  });

  it('vault references are well formed and cannot climb', () => {
    for (const ref of ['vault://a', 'vault://team/a.b/c_d-e', 'vault://x/.hidden'])
      expect(errorPaths(remoteHttp({ headers: { A: ref } }))).toEqual([]);
    for (const ref of ['vault://', 'vault://a//b', 'vault://a/../b', 'vault://./a', 'vault://a b', 'vault://a/'])
      expect(errorPaths(remoteHttp({ headers: { A: ref } }))).toEqual(['headers.A']);
  });

  it('overridable: any of four for local servers, only enabled for remote ones, no repeats', () => {
    expect(
      catalogEntryInput.parse(localStdio({ overridable: ['args', 'env', 'cwd', 'enabled'] })).overridable,
    ).toHaveLength(4);
    expect(errorPaths(remoteHttp({ overridable: ['enabled', 'env'] }))).toEqual(['overridable.1']);
    expect(errorPaths(localStdio({ overridable: ['command'] }))).toEqual(['overridable.0']);
    expect(errorPaths(localStdio({ overridable: ['env', 'env'] }))).toEqual(['overridable.1']);
  });
  it('sessions: shared only for remote stdio servers (a command or an image); left out, the entry says nothing', () => {
    const remoteStdio = localStdio({ mode: 'remote' });
    expect(catalogEntryInput.parse(remoteStdio).sessions).toBeUndefined();
    expect(catalogEntryInput.parse({ ...remoteStdio, sessions: 'shared' }).sessions).toBe('shared');
    expect(
      catalogEntryInput.safeParse(
        localStdio({
          mode: 'remote',
          command: undefined,
          args: undefined,
          image: 'ghcr.io/acme/gh:1.2.0',
          sessions: 'shared',
        }),
      ).success,
    ).toBe(true);
    expect(errorPaths(remoteHttp({ sessions: 'shared' }))).toEqual(['sessions']);
    expect(errorPaths(localStdio({ sessions: 'shared' }))).toEqual(['sessions']);
    expect(errorPaths({ ...remoteStdio, sessions: 'pooled' })).toEqual(['sessions']);
    // per_session is what every server does anyway: fine anywhere
    expect(errorPaths(remoteHttp({ sessions: 'per_session' }))).toEqual([]);
    expect(catalogEntryInput.safeParse(remoteHttp({ sessions: 'shared' })).error?.issues[0]?.message).toMatch(
      /^shared is for stdio servers/,
    );
  });
});

describe('catalog entry: auth oauth', () => {
  it('is for remote servers reached by url; left out, an entry has no oauth settings', () => {
    const parsed = catalogEntryInput.parse(
      remoteHttp({ auth: 'oauth', oauth: { scopes: ['repo', 'read:org'], connections: 'per_workspace' } }),
    );
    expect(oauthOf(parsed)).toEqual({ scopes: ['repo', 'read:org'], connections: 'per_workspace' });
    // per person unless the entry says otherwise
    expect(oauthOf(catalogEntryInput.parse(remoteHttp({ auth: 'oauth' })))).toEqual({ connections: 'per_person' });
    expect(oauthOf(catalogEntryInput.parse(remoteHttp()))).toBeNull();
    expect(errorPaths(localStdio({ auth: 'oauth' }))).toEqual(['auth', 'auth']);
    expect(errorPaths(localStdio({ mode: 'remote', auth: 'oauth' }))).toEqual(['auth']);
    expect(errorPaths(remoteHttp({ mode: 'local', auth: 'oauth' }))).toEqual(['auth']);
    expect(errorPaths(remoteHttp({ auth: 'basic' }))).toEqual(['auth']);
    expect(errorPaths(remoteHttp({ oauth: { connections: 'per_person' } }))).toEqual(['oauth']);
  });
  it('cannot be combined with an Authorization header, whatever its case', () => {
    expect(errorPaths(remoteHttp({ auth: 'oauth', headers: { authorization: 'vault://jira/token' } }))).toEqual([
      'headers.authorization',
    ]);
    expect(errorPaths(remoteHttp({ auth: 'oauth', headers: { AUTHORIZATION: 'Bearer x' } }))).toEqual([
      'headers.AUTHORIZATION',
    ]);
    // other headers are the entry's own business
    expect(errorPaths(remoteHttp({ auth: 'oauth', headers: { 'X-Tenant': 'acme' } }))).toEqual([]);
  });
  it('takes a hand-registered client, its secret only from the vault', () => {
    const client = { client_id: 'aileron-at-jira', client_secret: 'vault://jira/oauth-client-secret' };
    expect(errorPaths(remoteHttp({ auth: 'oauth', oauth: client }))).toEqual([]);
    expect(errorPaths(remoteHttp({ auth: 'oauth', oauth: { ...client, client_secret: 's3cret' } }))).toEqual([
      'oauth.client_secret',
    ]);
    expect(errorPaths(remoteHttp({ auth: 'oauth', oauth: { client_secret: client.client_secret } }))).toEqual([
      'oauth.client_secret',
    ]);
    expect(errorPaths(remoteHttp({ auth: 'oauth', oauth: { ...client, client_secret: 'vault://../up' } }))).toEqual([
      'oauth.client_secret',
    ]);
    expect(errorPaths(remoteHttp({ auth: 'oauth', oauth: { client_id: 'a\nb' } }))).toEqual(['oauth.client_id']);
    // the secret is read like every other reference of a remote entry
    expect(vaultReferences(catalogEntryInput.parse(remoteHttp({ auth: 'oauth', oauth: client })))).toEqual([
      'jira/oauth-client-secret',
    ]);
  });
  it('scopes are RFC 6749 scope tokens, each once; unknown settings are refused', () => {
    expect(errorPaths(remoteHttp({ auth: 'oauth', oauth: { scopes: ['a b'] } }))).toEqual(['oauth.scopes.0']);
    expect(errorPaths(remoteHttp({ auth: 'oauth', oauth: { scopes: ['a"'] } }))).toEqual(['oauth.scopes.0']);
    expect(errorPaths(remoteHttp({ auth: 'oauth', oauth: { scopes: ['repo', 'repo'] } }))).toEqual(['oauth.scopes.1']);
    expect(errorPaths(remoteHttp({ auth: 'oauth', oauth: { connections: 'per_team' } }))).toEqual([
      'oauth.connections',
    ]);
    expect(errorPaths(remoteHttp({ auth: 'oauth', oauth: { redirect_uri: 'https://x' } }))).toEqual(['oauth']);
  });
});

describe('vaultReferences', () => {
  it('lists the paths from env and headers, sorted and unique', () => {
    const image = catalogEntryInput.parse(
      localStdio({
        mode: 'remote',
        command: undefined,
        args: undefined,
        image: 'acme/github-mcp:1',
        env: { TOKEN: 'vault://github/token', B: 'vault://a/key', C: 'vault://github/token', LOG: 'debug' },
      }),
    );
    expect(vaultReferences(image)).toEqual(['a/key', 'github/token']);
    expect(
      vaultReferences({ env: { A: 'vault://z' }, headers: { Authorization: 'vault://jira/token', 'X-Org': 'acme' } }),
    ).toEqual(['jira/token', 'z']);
    expect(vaultReferences(catalogEntryInput.parse(localStdio()))).toEqual([]);
  });
});

describe('compareVersions', () => {
  it('orders by semver precedence', () => {
    const ordered = [
      '1.0.0-alpha',
      '1.0.0-alpha.1',
      '1.0.0-alpha.beta',
      '1.0.0-beta',
      '1.0.0-beta.2',
      '1.0.0-beta.11',
      '1.0.0-rc.1',
      '1.0.0',
      '1.2.0',
      '1.10.0',
      '2.0.0',
      '99999999999999999999.0.0',
    ];
    for (let i = 0; i < ordered.length; i++) {
      for (let j = 0; j < ordered.length; j++) expect(compareVersions(ordered[i]!, ordered[j]!)).toBe(Math.sign(i - j));
    }
    expect([...ordered].reverse().sort(compareVersions)).toEqual(ordered);
  });

  it('refuses what is not a version rather than guessing', () => {
    expect(isVersion('1.2.0')).toBe(true);
    expect(() => compareVersions('1.2', '1.2.0')).toThrow(RangeError);
  });
});
