import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BaselineServer, LocalServer, mergeConfig, MergePolicy, REJECTION_REASONS } from './config-merge';

function baselineServer(overrides: Partial<BaselineServer> = {}): BaselineServer {
  return {
    name: 'github',
    mode: 'local',
    command: 'npx',
    args: ['-y', '@acme/github-mcp'],
    env: { LOG: 'info', REGION: 'eu' },
    overridable: [],
    ...overrides,
  };
}

const remote = baselineServer({
  name: 'jira',
  mode: 'remote',
  command: undefined,
  args: undefined,
  env: undefined,
  url: 'https://pool.example/jira',
  overridable: ['enabled'],
});
const open: MergePolicy = { allow_local_servers: true };
const closed: MergePolicy = { allow_local_servers: false };

describe('config merge', () => {
  it('baseline servers are always present, enabled, and unchanged without local entries', () => {
    const { servers, rejected } = mergeConfig([remote, baselineServer()], closed, []);
    expect(rejected).toEqual([]);
    expect(servers.map((s) => [s.name, s.source, s.enabled, s.overridden])).toEqual([
      ['github', 'baseline', true, []],
      ['jira', 'baseline', true, []],
    ]);
    expect(servers[0]).not.toHaveProperty('url');
  });

  it('an override changes only listed fields: args replace, env merges (local wins), cwd replaces, enabled toggles', () => {
    const baseline = [baselineServer({ overridable: ['args', 'env', 'cwd', 'enabled'] })];
    const local: LocalServer[] = [
      { name: 'github', args: ['--verbose'], env: { LOG: 'debug', TOKEN_FILE: '~/.gh' }, cwd: '/src', enabled: false },
    ];
    const [github] = mergeConfig(baseline, closed, local).servers;
    expect(github).toEqual({
      name: 'github',
      source: 'baseline',
      mode: 'local',
      enabled: false,
      command: 'npx',
      args: ['--verbose'],
      env: { LOG: 'debug', REGION: 'eu', TOKEN_FILE: '~/.gh' },
      cwd: '/src',
      overridden: ['args', 'cwd', 'enabled', 'env'],
    });
  });

  it('any other field is ignored and reported, one rejection per field', () => {
    const baseline = [baselineServer({ overridable: ['env'] })];
    const local: LocalServer[] = [
      { name: 'github', command: '/usr/bin/evil', url: 'http://x', args: [], env: { LOG: 'debug' }, enabled: false },
    ];
    const { servers, rejected } = mergeConfig(baseline, open, local);
    expect(servers[0]).toMatchObject({
      command: 'npx',
      args: ['-y', '@acme/github-mcp'],
      enabled: true,
      env: { LOG: 'debug', REGION: 'eu' },
      overridden: ['env'],
    });
    expect(rejected).toEqual([
      { server: 'github', field: 'args', reason: 'FIELD_NOT_OVERRIDABLE' },
      { server: 'github', field: 'command', reason: 'FIELD_NOT_OVERRIDABLE' },
      { server: 'github', field: 'enabled', reason: 'FIELD_NOT_OVERRIDABLE' },
      { server: 'github', field: 'url', reason: 'FIELD_NOT_OVERRIDABLE' },
    ]);
  });

  it('a remote server may only be switched off, whatever its list says', () => {
    const loose = { ...remote, overridable: ['enabled', 'env'] as BaselineServer['overridable'] };
    const { servers, rejected } = mergeConfig([loose], open, [{ name: 'jira', enabled: false, env: { X: '1' } }]);
    expect(servers[0]).toMatchObject({ enabled: false, overridden: ['enabled'] });
    expect(servers[0]).not.toHaveProperty('env');
    expect(rejected).toEqual([{ server: 'jira', field: 'env', reason: 'FIELD_NOT_OVERRIDABLE' }]);
  });

  it('a server the organisation switched off stays off and keeps its name', () => {
    const killed = baselineServer({ enabled: false, overridable: ['args', 'env', 'cwd', 'enabled'] });
    const { servers, rejected } = mergeConfig([killed], open, [{ name: 'github', enabled: true, args: ['x'] }]);
    expect(servers).toEqual([
      expect.objectContaining({
        name: 'github',
        source: 'baseline',
        enabled: false,
        args: ['-y', '@acme/github-mcp'],
        overridden: [],
      }),
    ]);
    expect(rejected.map((r) => r.field)).toEqual(['args', 'enabled']);
  });

  it('new local servers are added only when the organisation allows them', () => {
    const local: LocalServer[] = [{ name: 'scratch', command: './run.sh' }];
    expect(mergeConfig([baselineServer()], closed, local)).toEqual({
      servers: [expect.objectContaining({ name: 'github' })],
      rejected: [{ server: 'scratch', reason: 'LOCAL_SERVERS_NOT_ALLOWED' }],
    });
    const { servers } = mergeConfig([baselineServer()], open, local);
    expect(servers[1]).toEqual({
      name: 'scratch',
      source: 'local',
      mode: 'local',
      enabled: true,
      command: './run.sh',
      overridden: [],
    });
  });

  it('local names follow the catalog rule and may not start with "aileron"', () => {
    const local: LocalServer[] = ['My_Server', 'aileron', 'aileron-tools', 'ok-name'].map((name) => ({
      name,
      command: 'x',
    }));
    const { servers, rejected } = mergeConfig([], open, local);
    expect(servers.map((s) => s.name)).toEqual(['ok-name']);
    expect(rejected).toEqual([
      { server: 'My_Server', reason: 'INVALID_NAME' },
      { server: 'aileron', reason: 'NAME_RESERVED' },
      { server: 'aileron-tools', reason: 'NAME_RESERVED' },
    ]);
    expect(mergeConfig([], closed, local).rejected.map((r) => r.reason)).toEqual(
      Array(4).fill('LOCAL_SERVERS_NOT_ALLOWED'),
    );
  });

  it('the first of duplicate local entries is used; later ones are reported', () => {
    const baseline = [baselineServer({ overridable: ['enabled'] })];
    const local: LocalServer[] = [
      { name: 'github', enabled: false },
      { name: 'github', enabled: true },
      { name: 'a', command: '1' },
      { name: 'a', command: '2' },
    ];
    const { servers, rejected } = mergeConfig(baseline, open, local);
    expect(servers.map((s) => [s.name, s.enabled, s.command])).toEqual([
      ['a', true, '1'],
      ['github', false, 'npx'],
    ]);
    expect(rejected).toEqual([
      { server: 'a', reason: 'DUPLICATE_LOCAL_SERVER' },
      { server: 'github', reason: 'DUPLICATE_LOCAL_SERVER' },
    ]);
  });

  it('is deterministic and leaves its inputs alone', () => {
    const baseline = [
      baselineServer({ name: 'zeta', overridable: ['args', 'env'] }),
      baselineServer({ name: 'alpha' }),
    ];
    const local: LocalServer[] = [
      { name: 'zeta', args: ['a'], env: { LOG: 'x' } },
      { name: 'mid', command: 'm', args: ['1'] },
    ];
    const before = JSON.stringify([baseline, local]);
    const first = mergeConfig(baseline, open, local);
    expect(JSON.stringify([baseline, local])).toBe(before);
    expect(mergeConfig(baseline, open, local)).toEqual(first);
    expect(first.servers.map((s) => s.name)).toEqual(['alpha', 'mid', 'zeta']);
    first.servers[0]!.args!.push('mutated');
    first.servers[1]!.args!.push('mutated');
    expect(JSON.stringify([baseline, local])).toBe(before);
  });

  describe('switching a remote server to local', () => {
    const prefixed = { ...remote, tool_prefix: 'jr' };
    const switched: LocalServer = {
      name: 'jira',
      mode: 'local',
      command: 'npx',
      args: ['-y', '@acme/jira-mcp'],
      env: { JIRA_TOKEN_FILE: '~/.jira' },
      cwd: '/src',
    };

    it('runs it locally under the same name and tool prefix, with nothing of the remote definition', () => {
      const { servers, rejected } = mergeConfig([prefixed, baselineServer()], open, [switched]);
      expect(rejected).toEqual([]);
      expect(servers.find((s) => s.name === 'jira')).toEqual({
        name: 'jira',
        source: 'local',
        mode: 'local',
        enabled: true,
        command: 'npx',
        args: ['-y', '@acme/jira-mcp'],
        env: { JIRA_TOKEN_FILE: '~/.jira' },
        cwd: '/src',
        tool_prefix: 'jr',
        overridden: ['mode'],
      });
      // a local Streamable HTTP server will do too, and may start switched off
      const byUrl = mergeConfig([prefixed], open, [
        { name: 'jira', mode: 'local', url: 'http://127.0.0.1:9000/mcp', enabled: false },
      ]);
      expect(byUrl.servers[0]).toMatchObject({ mode: 'local', url: 'http://127.0.0.1:9000/mcp', enabled: false });
      expect(byUrl.servers[0]!.url).not.toBe(remote.url);
    });

    it('is refused whole where the organisation allows no local servers: the server stays remote', () => {
      const { servers, rejected } = mergeConfig([prefixed], closed, [{ ...switched, enabled: false }]);
      expect(rejected).toEqual([{ server: 'jira', field: 'mode', reason: 'LOCAL_SERVERS_NOT_ALLOWED' }]);
      expect(servers).toEqual([
        {
          name: 'jira',
          source: 'baseline',
          mode: 'remote',
          enabled: true,
          url: 'https://pool.example/jira',
          tool_prefix: 'jr',
          overridden: [],
        },
      ]);
    });

    it('needs exactly one of a command or a URL', () => {
      const none = mergeConfig([remote], open, [{ name: 'jira', mode: 'local', args: ['x'] }]);
      expect(none.rejected).toEqual([{ server: 'jira', field: 'command', reason: 'COMMAND_OR_URL_REQUIRED' }]);
      expect(none.servers[0]).toMatchObject({ mode: 'remote', source: 'baseline' });
      const both = mergeConfig([remote], open, [{ name: 'jira', mode: 'local', command: 'x', url: 'http://x' }]);
      expect(both.rejected).toEqual([{ server: 'jira', field: 'url', reason: 'COMMAND_OR_URL_REQUIRED' }]);
    });

    it('cannot bring back a server the organisation switched off', () => {
      const { servers, rejected } = mergeConfig([{ ...remote, enabled: false }], open, [switched]);
      expect(servers[0]).toMatchObject({ mode: 'remote', enabled: false, overridden: [] });
      expect(rejected.map((r) => [r.field, r.reason])).toEqual([
        ['args', 'FIELD_NOT_OVERRIDABLE'],
        ['command', 'FIELD_NOT_OVERRIDABLE'],
        ['cwd', 'FIELD_NOT_OVERRIDABLE'],
        ['env', 'FIELD_NOT_OVERRIDABLE'],
        ['mode', 'FIELD_NOT_OVERRIDABLE'],
      ]);
    });

    it('a local file makes nothing remote; saying the mode a server already has changes nothing', () => {
      const github = baselineServer({ overridable: ['enabled'] });
      const { servers, rejected } = mergeConfig([github, remote], open, [
        { name: 'github', mode: 'remote', enabled: false },
        { name: 'jira', mode: 'remote', enabled: false },
        { name: 'scratch', mode: 'remote', url: 'http://x' },
        { name: 'tools', mode: 'local', command: './tools' },
      ]);
      expect(rejected).toEqual([
        { server: 'github', field: 'mode', reason: 'MODE_NOT_LOCAL' },
        { server: 'scratch', field: 'mode', reason: 'MODE_NOT_LOCAL' },
      ]);
      expect(servers.map((s) => [s.name, s.mode, s.enabled, s.overridden])).toEqual([
        ['github', 'local', false, ['enabled']],
        ['jira', 'remote', false, ['enabled']],
        ['tools', 'local', true, []],
      ]);
    });
  });

  it('refuses a baseline that names a server twice', () => {
    expect(() => mergeConfig([baselineServer(), baselineServer()], open, [])).toThrow();
  });

  it('docs/catalog.md lists every merge reason, and no other, in its table of reasons', () => {
    const doc = readFileSync(join(__dirname, '../../../../docs/catalog.md'), 'utf8');
    const section = doc.slice(doc.indexOf('### Merge reasons'), doc.indexOf('### Switching a remote server'));
    const listed = [...section.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]);
    expect([...listed].sort()).toEqual([...REJECTION_REASONS].sort());
  });
});
