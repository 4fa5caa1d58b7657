import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RouteCatalog, RouteDefinition } from '../../libs/platform/http/src';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';

/**
 * Every list answers one way (API.md): `?limit=&cursor=` in, `{items,
 * next_cursor}` out. A GET whose answer holds a collection is a list unless
 * it is named here with why it is not paged.
 */
const NOT_PAGED: Record<string, string> = {
  'GET /v1/me': 'the caller, with the workspaces it belongs to: one identity, not a collection to browse',
  'GET /.well-known/aileron/policy-keys': 'a JWKS document: verifiers need every key at once',
  'GET /.well-known/aileron/audit-keys': 'a JWKS document: verifiers need every key at once',
  'GET /v1/gateway/catalog': "the gateway's whole bundle, cached by ETag: a gateway needs all of it",
  'GET /v1/gateway/policy': 'the signed policy bundle: a gateway needs all of it',
  'GET /v1/workspaces/:ws/policy': 'one document (its rules are the document)',
  'GET /v1/workspaces/:ws/policy/versions/:version': 'one document',
  'GET /v1/workspaces/:ws/policy/diff': 'one comparison of two documents',
  'GET /v1/workspaces/:ws/approval-routes': 'one document',
  'GET /v1/workspaces/:ws/shell-rules': 'one document',
  'GET /v1/approvals/:id': 'one request with its decisions',
  'GET /review/:id/request': 'one request with its decisions',
  'GET /review/:id/session': 'one request with its decisions',
  'GET /v1/catalog/servers/:name': 'one server with its versions',
  'GET /v1/webhooks/:id': 'one endpoint with its event types',
  'GET /v1/openapi.json': 'this description of the API',
  'GET /v1/workspaces/:ws/pool/settings': 'one settings object',
  'GET /v1/workspaces/:ws/overview':
    "one summary: its buckets are the window's (60 minutes or 24 hours), its instances the replica's, its gateways the few seen last",
  'GET /v1/workspaces/:ws/sandboxes/:name/bundle': 'a git bundle, not JSON',
  'GET /v1/workspaces/:ws/sandboxes/:name/snapshots/:sha/diff': 'one unified diff, not JSON',
};

function shapeOf(schema: z.ZodType | undefined): Record<string, z.ZodType> | undefined {
  return schema instanceof z.ZodObject ? (schema.shape as Record<string, z.ZodType>) : undefined;
}

/** An array of objects at the top of the answer: rows to page through (an array of names or numbers is one resource's field). */
function holdsCollection(schema: z.ZodType | undefined): boolean {
  const shape = shapeOf(schema);
  return (
    shape !== undefined &&
    Object.values(shape).some((field) => field instanceof z.ZodArray && field.element instanceof z.ZodObject)
  );
}

describe('list shape', () => {
  let cp: TestControlPlane;
  let routes: RouteDefinition[];

  beforeAll(async () => {
    cp = await startApiControlPlane();
    routes = cp.cp.app.get(RouteCatalog).all();
  });
  afterAll(async () => cp?.close());

  it('every GET whose answer holds a collection takes limit and cursor and answers items and next_cursor', () => {
    const wrong: string[] = [];
    for (const route of routes.filter(
      (r) => r.method === 'GET' && (r.produces ?? 'application/json') === 'application/json',
    )) {
      const name = `${route.method} ${route.path}`;
      if (name in NOT_PAGED) continue;
      const query = shapeOf(route.query) ?? {};
      const paged = 'limit' in query && 'cursor' in query;
      const answer = shapeOf(route.response);
      if (paged) {
        if (answer && !('items' in answer && 'next_cursor' in answer))
          wrong.push(`${name}: pages but does not answer {items, next_cursor}`);
      } else if (route.response === undefined || holdsCollection(route.response)) {
        wrong.push(
          `${name}: ${route.response === undefined ? 'declares no response and' : 'answers a collection but'} takes no limit and cursor`,
        );
      }
    }
    expect(wrong).toEqual([]);
  });
});
