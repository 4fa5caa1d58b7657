import { z } from 'zod';
import { forbiddenVariables } from './environment';

/**
 * Server names have no underscores, so `server__tool` splits at the first `__`
 * unambiguously and a name is safe in URLs, file names and env var suffixes.
 */
export const SERVER_NAME = /^[a-z0-9][a-z0-9-]{0,31}$/;
/** names of servers the control plane serves itself (`/mcp/{ws}/sandbox`): no catalog entry may take one */
export const RESERVED_SERVER_NAMES: readonly string[] = ['sandbox'];
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** RFC 9110 token: what an HTTP header name may contain. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
export const TOOL_PREFIX = /^[a-z0-9][a-z0-9_]{0,15}$/;

/**
 * Semantic versions without build metadata: `1.2.0+a` and `1.2.0+b` have equal
 * precedence, so two published versions could not be ordered for a rollout.
 */
const VERSION =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?$/;

/** `vault://team/github.token`; dot-only segments are refused so a path cannot climb. */
const VAULT_PREFIX = 'vault://';
const VAULT_REF = /^vault:\/\/(?!\.+(?:\/|$))[A-Za-z0-9_.-]+(?:\/(?!\.+(?:\/|$))[A-Za-z0-9_.-]+)*$/;

/** OCI reference, after the distribution grammar: `[host[:port]/]path[:tag][@digest]`. */
const IMAGE =
  /^(?:(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])(?:\.(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9]))*(?::\d+)?\/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::\w[\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$/;

export const OVERRIDABLE_FIELDS = ['args', 'env', 'cwd', 'enabled'] as const;
/**
 * How the pool serves a remote stdio server's MCP sessions: `per_session`, a
 * child (and upstream session) of its own for each; `shared`, one upstream
 * session for all of a workspace's sessions, for servers that keep no state
 * per session (docs/pool.md, Shared sessions).
 */
export const SESSION_MODES = ['per_session', 'shared'] as const;
export type SessionMode = (typeof SESSION_MODES)[number];
/**
 * Whose OAuth connection to an upstream the pool uses for a call: the
 * caller's own (`per_person`, the default: the upstream sees, and limits,
 * each person as themselves), or one an admin made for everyone in the
 * workspace (`per_workspace`).
 */
export const CONNECTION_MODES = ['per_person', 'per_workspace'] as const;
export type ConnectionMode = (typeof CONNECTION_MODES)[number];
/** RFC 6749 § 3.3: a scope token is printable ASCII without space, `"` or `\`. */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;
/** The pool runs remote servers; a developer's machine can only switch them off for itself. */
const REMOTE_OVERRIDABLE: readonly string[] = ['enabled'];

export function isVersion(value: string): boolean {
  return VERSION.test(value);
}

export function isVaultReference(value: string): boolean {
  return value.startsWith(VAULT_PREFIX);
}

/**
 * Semver precedence: numeric parts compare as numbers, a pre-release sorts
 * below its release, and pre-release identifiers compare numerically when both
 * are digits, with digits below letters, and a shorter list first on a tie.
 * Digit strings compare by length first, so no part overflows a number.
 */
export function compareVersions(a: string, b: string): -1 | 0 | 1 {
  const x = VERSION.exec(a);
  const y = VERSION.exec(b);
  if (!x || !y) throw new RangeError(`not a semantic version: ${!x ? a : b}`);
  for (let i = 1; i <= 3; i++) {
    const order = compareDigits(x[i]!, y[i]!);
    if (order !== 0) return order;
  }
  const pa = x[4];
  const pb = y[4];
  if (pa === undefined || pb === undefined) return pa === pb ? 0 : pa === undefined ? 1 : -1;
  const ia = pa.split('.');
  const ib = pb.split('.');
  for (let i = 0; i < Math.min(ia.length, ib.length); i++) {
    const order = compareIdentifiers(ia[i]!, ib[i]!);
    if (order !== 0) return order;
  }
  return sign(ia.length - ib.length);
}

function compareIdentifiers(a: string, b: string): -1 | 0 | 1 {
  const na = /^\d+$/.test(a);
  const nb = /^\d+$/.test(b);
  if (na && nb) return compareDigits(a, b);
  if (na !== nb) return na ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

function compareDigits(a: string, b: string): -1 | 0 | 1 {
  if (a.length !== b.length) return sign(a.length - b.length);
  return a < b ? -1 : a > b ? 1 : 0;
}

function sign(n: number): -1 | 0 | 1 {
  return n < 0 ? -1 : n > 0 ? 1 : 0;
}

/** A literal value, or a well-formed vault reference: `vault:/x` typos must not pass as literals. */
function secretCapable(value: z.ZodString) {
  return value.refine((v) => !isVaultReference(v) || VAULT_REF.test(v), {
    message: 'a vault reference is vault://<path>, path segments of [A-Za-z0-9_.-] joined by "/"',
  });
}

// NUL cannot reach a process environment, and CR/LF in a header value would split the request.
const envValue = secretCapable(
  z
    .string()
    .max(8192)
    .refine((v) => !v.includes('\0'), { message: 'must not contain NUL' }),
);
const headerValue = secretCapable(
  z
    .string()
    .max(8192)
    .refine((v) => !/[\r\n\0]/.test(v), { message: 'must not contain CR, LF or NUL' }),
);

const upstreamUrl = z
  .url({ protocol: /^https?$/, error: 'must be an http or https URL' })
  .max(2048)
  // credentials in a URL end up in logs and listings; they belong in a header with a vault reference
  .refine((v) => !URL.canParse(v) || (new URL(v).username === '' && new URL(v).password === ''), {
    message: 'must not contain credentials; use a header with a vault reference',
  });

/**
 * How the pool signs in to an upstream that wants OAuth (`auth: oauth`): the
 * client it is registered as, when an admin registered one by hand (its
 * secret only as a vault reference), the scopes to ask for, and whose
 * connection a call uses.
 */
const oauthSettings = z.strictObject({
  client_id: z
    .string()
    .min(1)
    .max(512)
    // eslint-disable-next-line no-control-regex -- control characters are what it refuses
    .refine((v) => !/[\x00-\x1F\x7F]/.test(v), { message: 'must not contain control characters' })
    .optional()
    .describe('a client the admin registered at the authorization server by hand'),
  client_secret: z
    .string()
    .max(300)
    .regex(VAULT_REF, 'must be a vault reference (vault://<path>): a client secret is never written into an entry')
    .optional()
    .describe("that client's secret, as a vault reference"),
  scopes: z
    .array(z.string().min(1).max(200).regex(SCOPE_TOKEN, 'a scope is printable ASCII without spaces, " or \\'))
    .max(50)
    .optional()
    .describe('the scopes to ask for; left out, those the upstream names'),
  connections: z.enum(CONNECTION_MODES).optional().describe('per_person (left out) or per_workspace'),
});
export type OauthSettings = z.infer<typeof oauthSettings>;

/**
 * The simple case stays one stanza (the hybrid ADR): `mode` left out is `local`, and
 * `transport` left out follows from how the server is reached: a `url` is Streamable
 * HTTP, anything else stdio (a `command` or an `image`; with neither, the entry is
 * refused for the command it lacks).
 */
function transportOf(entry: { transport?: Transport | undefined; url?: string | undefined }): Transport {
  return entry.transport ?? (entry.url !== undefined ? 'streamable_http' : 'stdio');
}
type Transport = 'stdio' | 'streamable_http';

/** One published version of an organisation's MCP server definition (`POST /v1/catalog/servers`). */
export const catalogEntryInput = z
  .strictObject({
    name: z
      .string()
      .regex(SERVER_NAME, 'lowercase letters, digits and "-", starting with a letter or digit, at most 32 characters')
      .refine(
        (name) => !RESERVED_SERVER_NAMES.includes(name),
        'is reserved for a server the control plane serves itself',
      ),
    version: z
      .string()
      .max(64)
      .regex(VERSION, 'must be a semantic version such as 1.2.0 or 1.2.0-rc.1, without build metadata'),
    mode: z.enum(['local', 'remote']).default('local'),
    transport: z.enum(['stdio', 'streamable_http']).optional(),
    command: z.string().min(1).max(1024).optional(),
    args: z.array(z.string().max(8192)).max(256).optional(),
    image: z
      .string()
      .max(512)
      .regex(IMAGE, 'must be an OCI image reference such as ghcr.io/acme/server:1.2.0')
      .optional(),
    url: upstreamUrl.optional(),
    env: z
      .record(z.string().max(256).regex(ENV_NAME, 'environment variable names are [A-Za-z_][A-Za-z0-9_]*'), envValue)
      .optional(),
    headers: z.record(z.string().max(256).regex(HEADER_NAME, 'must be an HTTP header name'), headerValue).optional(),
    tool_prefix: z
      .string()
      .regex(TOOL_PREFIX, 'lowercase letters, digits and "_", starting with a letter or digit, at most 16 characters')
      // same reason as for names: `<prefix>__<tool>` must split at the first "__"
      .refine((v) => !v.includes('__') && !v.endsWith('_'), { message: 'must not contain "__" or end with "_"' })
      .optional(),
    description: z.string().max(1000).optional(),
    overridable: z.array(z.enum(OVERRIDABLE_FIELDS)).default([]),
    /** left out: `per_session`, as every entry published before the field existed */
    sessions: z.enum(SESSION_MODES).optional(),
    /** `oauth`: the pool signs in to the upstream with OAuth, per person or per workspace (docs/oauth.md) */
    auth: z.enum(['oauth']).optional(),
    oauth: oauthSettings.optional(),
  })
  .superRefine((entry, ctx) => {
    const given = (['command', 'image', 'url'] as const).filter((field) => entry[field] !== undefined);
    if (given.length > 1) {
      for (const field of given.slice(1))
        ctx.addIssue({
          code: 'custom',
          path: [field],
          message: `give exactly one of command, image or url; ${given[0]} is already set`,
        });
    }
    if (transportOf(entry) === 'stdio') {
      if (given.length === 0)
        ctx.addIssue({ code: 'custom', path: ['command'], message: 'a stdio server needs a command or an image' });
      if (entry.url !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['url'],
          message: 'a stdio server runs a command or an image; url is for streamable_http',
        });
      if (entry.headers !== undefined)
        ctx.addIssue({ code: 'custom', path: ['headers'], message: 'headers are only for streamable_http servers' });
    } else {
      if (entry.url === undefined)
        ctx.addIssue({ code: 'custom', path: ['url'], message: 'a streamable_http server needs a url' });
      for (const field of ['command', 'image'] as const) {
        if (entry[field] !== undefined)
          ctx.addIssue({
            code: 'custom',
            path: [field],
            message: `a streamable_http server is reached by url, not ${field}`,
          });
      }
    }
    // an org admin's variables must never reach a program that starts on the host (docs/catalog.md)
    for (const { name, reason } of forbiddenVariables(entry.env))
      ctx.addIssue({ code: 'custom', path: ['env', name], message: reason });
    if (entry.env !== undefined && entry.url !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['env'],
        message: 'env is for servers we start (command or image), not for a url',
      });
    if (entry.args !== undefined && entry.command === undefined)
      ctx.addIssue({ code: 'custom', path: ['args'], message: 'args need a command' });
    if (entry.mode === 'local') {
      // gateways run commands on developers' machines; they do not pull and run images
      if (entry.image !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['image'],
          message: 'a local server cannot use an image; use a command, or mode remote',
        });
      // A local server's secrets reach it as environment variables: its gateway asks for the
      // values (of secrets marked deliverable) when it starts the process. A url has no
      // process to inject into; the pool, which keeps credentials central, serves it instead.
      for (const [key, value] of Object.entries(entry.headers ?? {})) {
        if (isVaultReference(value))
          ctx.addIssue({
            code: 'custom',
            path: ['headers', key],
            message: `${key}: a local server gets vault references in env only; use mode remote for a url that needs a credential`,
          });
      }
    } else {
      entry.overridable.forEach((field, i) => {
        if (!REMOTE_OVERRIDABLE.includes(field))
          ctx.addIssue({
            code: 'custom',
            path: ['overridable', i],
            message: `a remote server may only let developers override enabled, not ${field}`,
          });
      });
    }
    if (entry.sessions === 'shared') {
      // sharing is the pool's: one child behind it for every session; a url keeps its own sessions, a gateway its own process
      if (transportOf(entry) !== 'stdio')
        ctx.addIssue({
          code: 'custom',
          path: ['sessions'],
          message:
            'shared is for stdio servers (a command or an image); a streamable_http server keeps a session of its own for each client',
        });
      else if (entry.mode === 'local')
        ctx.addIssue({
          code: 'custom',
          path: ['sessions'],
          message:
            "shared is for remote servers, whose sessions the pool serves; a local server runs on each developer's machine",
        });
    }
    for (const { path, message } of oauthProblems(entry)) ctx.addIssue({ code: 'custom', path, message });
    entry.overridable.forEach((field, i) => {
      if (entry.overridable.indexOf(field) !== i)
        ctx.addIssue({ code: 'custom', path: ['overridable', i], message: `${field} is listed twice` });
    });
  })
  .transform((entry) => ({ ...entry, transport: transportOf(entry) }));

export type CatalogEntryInput = z.infer<typeof catalogEntryInput>;
/**
 * `auth: oauth` is the pool's: it signs in to a URL it reaches itself. The
 * token it gets goes in the Authorization header, so the entry may not set
 * one, and a hand-registered client's secret goes with its id.
 */
function oauthProblems(entry: {
  mode: 'local' | 'remote';
  url?: string | undefined;
  transport?: Transport | undefined;
  headers?: Record<string, string> | undefined;
  auth?: 'oauth' | undefined;
  oauth?: OauthSettings | undefined;
}): { path: (string | number)[]; message: string }[] {
  const problems: { path: (string | number)[]; message: string }[] = [];
  if (entry.auth !== 'oauth') {
    if (entry.oauth !== undefined) problems.push({ path: ['oauth'], message: 'oauth settings need auth: oauth' });
    return problems;
  }
  if (entry.mode !== 'remote')
    problems.push({
      path: ['auth'],
      message:
        'auth: oauth is for remote servers: the pool signs in to the upstream and keeps the tokens, a gateway never sees them',
    });
  if (transportOf(entry) !== 'streamable_http' || entry.url === undefined)
    problems.push({ path: ['auth'], message: 'auth: oauth is for a streamable_http server reached by url' });
  for (const name of Object.keys(entry.headers ?? {})) {
    if (name.toLowerCase() === 'authorization')
      problems.push({
        path: ['headers', name],
        message:
          'an entry with auth: oauth cannot set Authorization: the pool puts the connection’s access token there',
      });
  }
  if (entry.oauth?.client_secret !== undefined && entry.oauth.client_id === undefined)
    problems.push({ path: ['oauth', 'client_secret'], message: 'a client secret needs the client_id it belongs to' });
  entry.oauth?.scopes?.forEach((scope, i) => {
    if (entry.oauth!.scopes!.indexOf(scope) !== i)
      problems.push({ path: ['oauth', 'scopes', i], message: `${scope} is listed twice` });
  });
  return problems;
}

/** The vault paths an entry uses, sorted and unique: what the pool reads, or a gateway asks for (local entries). */
export function vaultReferences(entry: Pick<CatalogEntryInput, 'env' | 'headers' | 'oauth'>): string[] {
  const paths = new Set<string>();
  const secret = entry.oauth?.client_secret;
  for (const value of [
    ...Object.values(entry.env ?? {}),
    ...Object.values(entry.headers ?? {}),
    ...(secret ? [secret] : []),
  ]) {
    if (isVaultReference(value)) paths.add(value.slice(VAULT_PREFIX.length));
  }
  return [...paths].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** A stored definition's `tool_prefix` (see tool-names.ts), or null when it has none. */
export function toolPrefixOf(definition: Record<string, unknown>): string | null {
  return typeof definition.tool_prefix === 'string' ? definition.tool_prefix : null;
}

/** A stored definition's OAuth settings, with the default filled in, or null when the pool does not sign in with OAuth. */
export function oauthOf(
  definition: Record<string, unknown>,
): (Omit<OauthSettings, 'connections'> & { connections: ConnectionMode }) | null {
  if (definition.auth !== 'oauth') return null;
  const settings = (definition.oauth ?? {}) as OauthSettings;
  return { ...settings, connections: settings.connections ?? 'per_person' };
}
