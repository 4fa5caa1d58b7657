import { describe, expect, it } from 'vitest';
import { BaselineServer, LocalServer, mergeConfig, MergePolicy } from '../../libs/catalog/src';
import { aCatalogServer, aGateway, anOrganization, aWorkspace } from '../support/builders';
import type { TestControlPlane } from '../support/control-plane';
import { shared } from '../support/shared-control-plane';

interface GatewayCatalog {
  merge: MergePolicy;
  servers: (BaselineServer & { version: string })[];
}

/**
 * A developer's local layer over the catalog a gateway fetches
 * (`GET /v1/gateway/catalog`), merged by the rules every gateway implements
 * (`mergeConfig`, docs/catalog.md): a remote server switched to local under
 * its own name, where the organisation allows local servers.
 */
describe('switching a remote catalog server to local in the local layer', () => {
  let cp: TestControlPlane;
  shared.beforeAll(async ({ sharedControlPlane }) => {
    cp = await sharedControlPlane('pglite');
  });

  it('runs it locally under the same name and tool prefix where local servers are allowed, and refuses it where not', async () => {
    // gateway settings are the organisation's: one of the test's own
    const org = await anOrganization(cp);
    const ws = (await aWorkspace(cp, org.token)).slug;
    const server = await aCatalogServer(cp, org.token, {
      tool_prefix: 'jr',
      env: { JIRA_TOKEN: 'vault://jira/token' },
      overridable: ['enabled'],
    });
    const assigned = await cp.request('PUT', `/v1/workspaces/${ws}/servers/${server.name}`, {
      token: org.token,
      body: { version: server.version },
    });
    expect(assigned.status, assigned.text).toBe(200);
    const gateway = await aGateway(cp, org.token, ws);
    const settings = async (allow: boolean) => {
      const saved = await cp.request('PUT', '/v1/organization/gateway-settings', {
        token: org.token,
        body: { allow_local_servers: allow, offline_mode: 'fail_closed', max_stale_seconds: 3600 },
      });
      expect(saved.status, saved.text).toBe(200);
    };
    const catalog = async (): Promise<GatewayCatalog> => {
      const fetched = await cp.request('GET', '/v1/gateway/catalog', { token: gateway.token });
      expect(fetched.status, fetched.text).toBe(200);
      return fetched.body as GatewayCatalog;
    };
    const local: LocalServer[] = [
      {
        name: server.name,
        mode: 'local',
        command: './jira-mcp',
        args: ['--stdio'],
        env: { JIRA_TOKEN_FILE: '~/.jira' },
      },
    ];

    await settings(true);
    const open = await catalog();
    expect(open.merge).toEqual({ allow_local_servers: true });
    expect(open.servers).toEqual([expect.objectContaining({ name: server.name, mode: 'remote', tool_prefix: 'jr' })]);
    const switched = mergeConfig(open.servers, open.merge, local);
    expect(switched.rejected).toEqual([]);
    expect(switched.servers).toEqual([
      {
        name: server.name,
        source: 'local',
        mode: 'local',
        enabled: true,
        command: './jira-mcp',
        args: ['--stdio'],
        env: { JIRA_TOKEN_FILE: '~/.jira' },
        tool_prefix: 'jr',
        overridden: ['mode'],
      },
    ]);
    // the pool's credentials stay central: the developer's machine brings its own
    const secrets = await cp.request('POST', '/v1/gateway/secrets/resolve', {
      token: gateway.token,
      body: { server: server.name, version: server.version },
    });
    expect(secrets.status, secrets.text).toBe(409);
    expect(secrets.body.code).toBe('GATEWAY_SERVER_NOT_LOCAL');

    await settings(false);
    const closed = await catalog();
    expect(closed.merge).toEqual({ allow_local_servers: false });
    const refused = mergeConfig(closed.servers, closed.merge, local);
    expect(refused.rejected).toEqual([{ server: server.name, field: 'mode', reason: 'LOCAL_SERVERS_NOT_ALLOWED' }]);
    expect(refused.servers).toEqual([
      expect.objectContaining({
        name: server.name,
        source: 'baseline',
        mode: 'remote',
        url: expect.stringMatching(new RegExp(`/mcp/${ws}/${server.name}$`)),
        overridden: [],
      }),
    ]);
  });
});
