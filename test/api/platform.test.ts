import { describe, expect, it } from 'vitest';
import type { TestControlPlane } from '../support/control-plane';
import { shared } from '../support/shared-control-plane';

describe('health, metrics, OpenAPI and docs', () => {
  let cp: TestControlPlane;
  shared.beforeAll(async ({ sharedControlPlane }) => {
    cp = await sharedControlPlane('pglite');
  });

  it('serves Prometheus metrics with request counts and latencies per route template', async () => {
    await cp.request('GET', '/v1/workspaces/default');
    await cp.request('GET', '/v1/workspaces/nope');
    const res = await cp.request('GET', '/metrics', { token: null });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    expect(res.text).toMatch(
      /aileron_http_requests_total\{method="GET",route="\/v1\/workspaces\/:ws",status="200"\} \d+/,
    );
    expect(res.text).toMatch(
      /aileron_http_requests_total\{method="GET",route="\/v1\/workspaces\/:ws",status="404"\} \d+/,
    );
    expect(res.text).toMatch(
      /aileron_http_request_duration_seconds_bucket\{le="[0-9.]+",method="GET",route="\/v1\/workspaces\/:ws"\}/,
    );
    expect(res.text).not.toContain(cp.ownerToken);
  });

  it('publishes an OpenAPI document generated from the validation schemas', async () => {
    const res = await cp.request('GET', '/v1/openapi.json', { token: null });
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.openapi).toBe('3.1.0');
    for (const path of ['/v1/me', '/v1/organizations', '/v1/workspaces', '/v1/workspaces/{ws}', '/v1/tokens'])
      expect(Object.keys(doc.paths)).toContain(path);
    const create = doc.paths['/v1/workspaces'].post;
    const schema = create.requestBody.content['application/json'].schema;
    expect(schema.required).toEqual(expect.arrayContaining(['slug', 'name']));
    // the documented pattern is the one the API applies: a slug passes, what the API refuses does not
    const slug = new RegExp(schema.properties.slug.pattern);
    expect(['payments', 'team-42'].filter((s) => slug.test(s))).toEqual(['payments', 'team-42']);
    expect(['Not A Slug', 'UPPER', '-leading'].filter((s) => slug.test(s))).toEqual([]);
    expect(create.responses['401'].$ref).toBe('#/components/responses/Problem');
    expect(doc.paths['/healthz'].get.security).toEqual([]);
    // what a session caveat token needs on each operation; null: closed to session tokens
    expect(doc.paths['/v1/approvals/{id}'].get['x-aileron-capability']).toBe('approvals:poll');
    expect(doc.paths['/mcp/{ws}'].post['x-aileron-capability']).toBe('actions:list');
    expect(doc.paths['/v1/sessions/{id}/messages'].post['x-aileron-capability']).toBe('comms');
    expect(doc.paths['/v1/workspaces'].post['x-aileron-capability']).toBeNull();
    expect(doc.paths['/healthz'].get).not.toHaveProperty('x-aileron-capability');
    // a generated client fills each `{name}` of a path from the parameter of that name (a wildcard route's `{path}` too)
    const unnamed: string[] = [];
    for (const [path, operations] of Object.entries(doc.paths as Record<string, Record<string, any>>))
      for (const [method, operation] of Object.entries(operations)) {
        const declared = (operation.parameters ?? []).filter((p: any) => p.in === 'path').map((p: any) => p.name);
        const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
        if (declared.sort().join() !== templated.sort().join())
          unnamed.push(`${method} ${path}: ${declared.join()} ≠ ${templated.join()}`);
      }
    expect(unnamed).toEqual([]);
  });

  it('serves a human docs page that loads the document, with its assets from the package', async () => {
    const page = await cp.request('GET', '/docs', { token: null });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.text).toContain('/docs/assets/swagger-ui-bundle.js');
    const bundle = await cp.request('GET', '/docs/assets/swagger-ui-bundle.js', { token: null });
    expect(bundle.status).toBe(200);
    expect(bundle.text.length).toBeGreaterThan(100_000);
    expect((await cp.request('GET', '/docs/assets/secrets.txt', { token: null })).status).toBe(404);
  });

  it('echoes a valid X-Request-Id and puts the request id on every error', async () => {
    const res = await cp.request('GET', '/v1/workspaces/missing', { headers: { 'x-request-id': 'trace-abc.123' } });
    expect(res.headers.get('x-request-id')).toBe('trace-abc.123');
    expect(res.body.request_id).toBe('trace-abc.123');
    const forged = await cp.request('GET', '/v1/me', { headers: { 'x-request-id': 'bad id with spaces' } });
    expect(forged.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers readiness from the database and queue', async () => {
    expect((await cp.request('GET', '/readyz', { token: null })).body).toEqual({
      status: 'ok',
      database: true,
      queue: true,
    });
  });
});
