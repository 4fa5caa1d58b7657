import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';

/**
 * What an MCP client finds before it has any token: the 401 of every MCP
 * endpoint points at the endpoint's protected resource metadata (RFC 9728),
 * which names this control plane as the authorization server, whose metadata
 * (RFC 8414) says how to get a token.
 */
describe('discovering how to authorise on the MCP endpoints', () => {
  let cp: TestControlPlane;

  beforeAll(async () => {
    cp = await startApiControlPlane();
    // as an operator sets AILERON_PUBLIC_URL: the resources and the issuer are named by it
    cp.cp.config.publicUrl = cp.url;
  });
  afterAll(() => cp?.close());

  it.each([
    ['/mcp/default', 'default'],
    ['/mcp/default/some-server', 'default'],
    ['/mcp/team-b/sandbox', 'team-b'],
  ])('%s without a token: 401 pointing at the resource metadata of the workspace endpoint', async (path, ws) => {
    const res = await cp.request('POST', path, { token: null, body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
    expect(res.status, res.text).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="${cp.url}/.well-known/oauth-protected-resource/mcp/${ws}", scope="mcp"`,
    );
  });

  it('says the token sent is not good, with the same pointer, when one was sent', async () => {
    const res = await cp.request('POST', '/mcp/default', {
      token: 'ail_api_' + 'x'.repeat(43),
      body: { jsonrpc: '2.0', id: 1, method: 'ping' },
    });
    expect(res.status, res.text).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
    expect(res.headers.get('www-authenticate')).toContain('/.well-known/oauth-protected-resource/mcp/default');
  });

  it('puts no challenge on the 401s of the REST API', async () => {
    const res = await cp.request('GET', '/v1/me', { token: null });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBeNull();
  });

  it('serves the protected resource metadata of a workspace endpoint, and of one server under it', async () => {
    for (const path of ['/mcp/default', '/mcp/default/sandbox']) {
      const res = await cp.request('GET', `/.well-known/oauth-protected-resource${path}`, { token: null });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({
        resource: `${cp.url}/mcp/default`,
        authorization_servers: [cp.url],
        scopes_supported: ['mcp'],
        bearer_methods_supported: ['header'],
      });
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
    }
  });

  it('serves the authorization server metadata: code with PKCE S256, refresh, revocation, metadata documents', async () => {
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
      const res = await cp.request('GET', path, { token: null });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({
        issuer: cp.url,
        authorization_endpoint: `${cp.url}/oauth/auth`,
        token_endpoint: `${cp.url}/oauth/token`,
        revocation_endpoint: `${cp.url}/oauth/token/revocation`,
        registration_endpoint: `${cp.url}/oauth/reg`,
        response_types_supported: ['code'],
        code_challenge_methods_supported: ['S256'],
        client_id_metadata_document_supported: true,
      });
      expect(res.body.grant_types_supported).toEqual(expect.arrayContaining(['authorization_code', 'refresh_token']));
      expect(res.body.grant_types_supported).not.toContain('implicit');
      expect(res.body.token_endpoint_auth_methods_supported).toContain('none');
    }
  });
});
