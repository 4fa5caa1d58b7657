import { createHash } from 'node:crypto';
import { z } from 'zod';
import { ERROR_CODES, ErrorCode, problemType } from '@aileron/errors';
import { openApiPath, RouteDefinition } from './route.decorator';

const problemSchema = {
  type: 'object',
  required: ['type', 'title', 'status', 'detail', 'code'],
  properties: {
    type: { type: 'string' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
    code: {
      type: 'string',
      description: 'stable machine-readable error code (components.x-error-codes says what each means)',
      enum: Object.keys(ERROR_CODES),
    },
    request_id: { type: 'string' },
    errors: {
      type: 'array',
      items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } } },
    },
  },
};

/** Schemas that recursive types (a policy's argument values) refer to, shared by the whole document. */
type SharedSchemas = Record<string, unknown>;

function jsonSchema(schema: z.ZodType, io: 'input' | 'output', shared: SharedSchemas): Record<string, unknown> {
  const out = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'openapi-3.0' }) as Record<string, unknown>;
  delete out.$schema;
  return hoistDefinitions(out, shared);
}

/**
 * zod puts a recursive type's definitions beside the schema and refers to them
 * from the schema's root (`#/definitions/…`); inside a document that root is
 * the document's, where nothing by that name exists, so clients (the
 * console's type generator, Swagger UI) could not resolve them. They move to
 * `components.schemas` under names made from their content.
 */
function hoistDefinitions(schema: Record<string, unknown>, shared: SharedSchemas): Record<string, unknown> {
  const local = {
    ...((schema.definitions as Record<string, unknown> | undefined) ?? {}),
    ...((schema.$defs as Record<string, unknown> | undefined) ?? {}),
  };
  delete schema.definitions;
  delete schema.$defs;
  if (Object.keys(local).length === 0) return schema;
  const family = createHash('sha256').update(JSON.stringify(local)).digest('hex').slice(0, 12);
  const rename = (name: string): string => `Recursive_${family}_${name.replace(/[^A-Za-z0-9_]/g, '')}`;
  const rewrite = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(rewrite);
    if (!value || typeof value !== 'object') return value;
    return Object.fromEntries(
      Object.entries(value).map(([key, inner]) => {
        const match =
          key === '$ref' && typeof inner === 'string' ? /^#\/(?:definitions|\$defs)\/(.+)$/.exec(inner) : null;
        return [key, match ? `#/components/schemas/${rename(match[1]!)}` : rewrite(inner)];
      }),
    );
  };
  for (const [name, definition] of Object.entries(local)) shared[rename(name)] = rewrite(definition);
  return rewrite(schema) as Record<string, unknown>;
}

function parameters(where: 'path' | 'query', schema: z.ZodObject | undefined, shared: SharedSchemas): unknown[] {
  if (!schema) return [];
  const shape = jsonSchema(schema, 'input', shared) as {
    properties?: Record<string, Record<string, unknown>>;
    required?: string[];
  };
  return Object.entries(shape.properties ?? {}).map(([name, property]) => ({
    // a trailing wildcard (`/secrets/*`) is the `{path}` of the document's path (openApiPath): clients fill the template by name
    name: where === 'path' && name === '*' ? 'path' : name,
    in: where,
    required: where === 'path' || (shape.required ?? []).includes(name),
    ...(typeof property.description === 'string' ? { description: property.description } : {}),
    ...(property.deprecated === true ? { deprecated: true } : {}),
    schema: property,
  }));
}

/** The OpenAPI 3.1 document, built from the same zod schemas that validate requests. */
export function buildOpenApi(
  routes: RouteDefinition[],
  info: { title: string; version: string; serverUrl: string },
): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const shared: SharedSchemas = {};
  for (const route of routes) {
    const status = String(route.status ?? 200);
    const success: Record<string, unknown> =
      route.status === 204
        ? { description: 'No content' }
        : {
            description: 'Success',
            content: {
              [route.produces ?? 'application/json']: route.response
                ? { schema: jsonSchema(route.response, 'output', shared) }
                : {},
            },
          };
    const problem = { $ref: '#/components/responses/Problem' };
    const operation: Record<string, unknown> = {
      operationId: `${route.method.toLowerCase()}${openApiPath(route.path)
        .replace(/[{}]/g, '')
        .replace(/[^A-Za-z0-9]+(.)/g, (_, c: string) => c.toUpperCase())}`,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: [route.tag],
      ...(route.auth === 'public' ? { security: [] } : {}),
      ...(route.permission ? { 'x-aileron-permission': route.permission } : {}),
      'x-aileron-tenancy': route.tenancy,
      // every operation says what a session caveat token needs, null: closed to them (403 CAPABILITY_REQUIRED)
      ...(route.auth === 'public' ? {} : { 'x-aileron-capability': route.capability ?? null }),
      parameters: [...parameters('path', route.params, shared), ...parameters('query', route.query, shared)],
      ...(route.body
        ? {
            requestBody: {
              required: true,
              content: {
                'application/json': {
                  schema: jsonSchema(route.body, 'input', shared),
                  ...(route.example?.body ? { example: route.example.body } : {}),
                },
                ...(route.accepts?.includes('yaml')
                  ? { 'application/yaml': { schema: jsonSchema(route.body, 'input', shared) } }
                  : {}),
                ...(route.accepts?.includes('form')
                  ? { 'application/x-www-form-urlencoded': { schema: jsonSchema(route.body, 'input', shared) } }
                  : {}),
              },
            },
          }
        : {}),
      responses: {
        [status]: success,
        ...(route.body || route.params || route.query ? { '400': problem } : {}),
        ...(route.auth === 'public' ? {} : { '401': problem, '403': problem }),
        ...(route.params ? { '404': problem } : {}),
      },
    };
    (paths[openApiPath(route.path)] ??= {})[route.method.toLowerCase()] = operation;
  }
  return {
    openapi: '3.1.0',
    info: {
      title: info.title,
      version: info.version,
      description:
        'The Aileron control plane API. Every error is `application/problem+json` with a stable `code`. Authenticate with `Authorization: Bearer <token>` (an API token or an admin JWT).',
    },
    servers: [{ url: info.serverUrl }],
    security: [{ bearer: [] }],
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'API token (ail_api_…) or admin JWT' },
      },
      schemas: { Problem: problemSchema, ...shared },
      'x-error-codes': Object.entries(ERROR_CODES).map(([code, entry]) => ({
        code,
        status: entry.status,
        title: entry.title,
        type: problemType(code as ErrorCode),
        docs: entry.docs,
      })),
      responses: {
        Problem: {
          description: 'An error',
          content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
        },
      },
    },
    paths,
  };
}
