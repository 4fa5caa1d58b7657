import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { compileNameGlob } from '@aileron/glob';
import {
  MAX_MACAROON_BYTES,
  Macaroon,
  MacaroonFormatError,
  attenuate,
  chainHolds,
  decode,
  encode,
  mint,
} from './macaroon';

/**
 * The session caveat token: the only credential a sandbox holds. A macaroon
 * whose identifier names the organisation, the key and the session, and whose
 * caveats say what the holder may still do. Caveats only ever narrow: each is a
 * condition that must hold, so adding one can never grant anything.
 *
 * Caveat grammar (one per caveat, ASCII):
 *   session = <id>            workspace = <id>          sandbox = <name>
 *   caps in <cap>,<cap>…      servers in <name>,…       tools in <glob>,…
 *   expires < <unix seconds>
 */
export const CAVEAT_TOKEN_PREFIX = 'ail_ct_';

/** What an agent session may be allowed to do; a token's `caps` are a subset. */
export const SESSION_CAPABILITIES = ['actions:list', 'actions:run', 'approvals:poll', 'comms', 'sandbox:use'] as const;
export type Capability = (typeof SESSION_CAPABILITIES)[number];
/** a session reaches sandboxes only when its creator asks for `sandbox:use` */
export const DEFAULT_CAPABILITIES: readonly Capability[] = ['actions:list', 'actions:run', 'approvals:poll', 'comms'];

export function isCapability(value: string): value is Capability {
  return (SESSION_CAPABILITIES as readonly string[]).includes(value);
}

/** Refusals, each with the stable code the API answers with (401). */
export type CaveatRefusal = 'TOKEN_INVALID' | 'CAVEAT_UNKNOWN' | 'CAVEAT_MALFORMED' | 'TOKEN_EXPIRED';

export class CaveatTokenError extends Error {
  constructor(
    readonly code: CaveatRefusal,
    message: string,
  ) {
    super(message);
    this.name = 'CaveatTokenError';
  }
}

/**
 * What every token that is not ours hears, whichever part failed (encoding,
 * identifier, an organisation or key that does not exist or was removed, the
 * chain): one answer, so a guesser learns nothing about which organisations
 * and keys exist.
 */
export const TOKEN_INVALID_DETAIL = 'The token is not valid';

export function invalidToken(detail = TOKEN_INVALID_DETAIL): CaveatTokenError {
  return new CaveatTokenError('TOKEN_INVALID', detail);
}

export interface TokenIdentity {
  organizationId: string;
  keyId: string;
  sessionId: string;
}

/** A caveat as data; `toText`/`parseCaveat` are the only bridge to the wire. */
export type Caveat =
  | { kind: 'session'; id: string }
  | { kind: 'workspace'; id: string }
  | { kind: 'sandbox'; name: string }
  | { kind: 'caps'; caps: Capability[] }
  | { kind: 'servers'; names: string[] }
  | { kind: 'tools'; globs: string[] }
  | { kind: 'expires'; at: number };

/**
 * What a verified token allows: the conjunction of its caveats. Lists of lists
 * stay lists of lists (a tool must match some glob of *every* `tools` caveat)
 * so narrowing is structural, not an intersection someone could get wrong.
 */
export interface TokenGrant extends TokenIdentity {
  workspaces: string[];
  sandboxes: string[];
  caps: ReadonlySet<Capability>;
  servers: string[][];
  tools: Array<(name: string) => boolean>;
  toolGlobs: string[][];
  /** unix seconds; the token is dead at and after it */
  expiresAt: number;
}

export interface TokenRequest {
  capability: Capability;
  workspaceId: string;
  server?: string;
  /** namespaced `server__tool` */
  tool?: string;
  sandbox?: string;
}

const IDENTIFIER_VERSION = 'ail1';
/** Organisation and session ids as PostgreSQL prints a uuid: any other spelling names no row. */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** A session root key's id, as SessionKeys makes them. */
export const SESSION_KEY_ID = /^sk-[0-9a-f]{12}$/;
/** Ids, names and globs are plain: nothing that could smuggle a separator or a second caveat. */
const ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
export const CAVEAT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/**
 * A sandbox as the API names it (the slug its create answered; single
 * dashes, as the slug rule leaves no run of them): the tools compare the
 * caveat with the slug of their `sandbox` argument, so a caveat in another
 * spelling would reach no sandbox at all, silently.
 */
export const SANDBOX_CAVEAT_NAME = /^(?=.{1,63}$)[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const CAVEAT_GLOB = /^[A-Za-z0-9_.*?-]{1,128}$/;
export const MAX_LIST = 64;
const MAX_CAVEATS = 64;

/**
 * Whether each id has the one shape its row's key has. Checked on every token
 * before anything is looked up: an id of another shape names no row, and the
 * database would refuse it with an error (a non-uuid in a uuid column) rather
 * than find nothing.
 */
export function isWellFormedIdentity(identity: TokenIdentity): boolean {
  return UUID.test(identity.organizationId) && SESSION_KEY_ID.test(identity.keyId) && UUID.test(identity.sessionId);
}

export function identifierOf(identity: TokenIdentity, nonce = randomBytes(12).toString('base64url')): Buffer {
  // what is minted must read back: a token the verifier would refuse is a bug here, not at the far end
  if (!isWellFormedIdentity(identity) || !/^[A-Za-z0-9_-]{1,64}$/.test(nonce))
    throw new Error(`not a session token identity: ${JSON.stringify(identity)}`);
  return Buffer.from(
    `${IDENTIFIER_VERSION} ${identity.organizationId} ${identity.keyId} ${identity.sessionId} ${nonce}`,
    'utf8',
  );
}

function parseIdentifier(identifier: Buffer): TokenIdentity {
  const parts = identifier.toString('utf8').split(' ');
  if (parts.length !== 5 || parts[0] !== IDENTIFIER_VERSION) throw invalidToken();
  const identity = { organizationId: parts[1]!, keyId: parts[2]!, sessionId: parts[3]! };
  if (!isWellFormedIdentity(identity)) throw invalidToken();
  return identity;
}

export function caveatText(caveat: Caveat): string {
  switch (caveat.kind) {
    case 'session':
      return `session = ${caveat.id}`;
    case 'workspace':
      return `workspace = ${caveat.id}`;
    case 'sandbox':
      return `sandbox = ${caveat.name}`;
    case 'caps':
      return `caps in ${caveat.caps.join(',')}`;
    case 'servers':
      return `servers in ${caveat.names.join(',')}`;
    case 'tools':
      return `tools in ${caveat.globs.join(',')}`;
    case 'expires':
      return `expires < ${caveat.at}`;
  }
}

function list(value: string, valid: (item: string) => boolean, what: string): string[] {
  const items = value.split(',');
  if (items.length > MAX_LIST || !items.every(valid))
    throw new CaveatTokenError('CAVEAT_MALFORMED', `A caveat lists an invalid ${what}`);
  return items;
}

/** Refuses what it does not know: an unknown caveat may be a restriction we would fail to apply. */
export function parseCaveat(text: string): Caveat {
  const match = /^([a-z]+) (=|in|<) (\S+)$/.exec(text);
  if (!match) throw new CaveatTokenError('CAVEAT_MALFORMED', 'A caveat does not parse');
  const [, key, op, value] = match as unknown as [string, string, string, string];
  const expect = (wanted: string) => {
    if (op !== wanted) throw new CaveatTokenError('CAVEAT_MALFORMED', `The caveat "${key}" takes "${wanted}"`);
  };
  switch (key) {
    case 'session':
    case 'workspace':
      expect('=');
      if (!ID.test(value)) throw new CaveatTokenError('CAVEAT_MALFORMED', `The ${key} caveat names an invalid id`);
      return { kind: key, id: value };
    case 'sandbox':
      expect('=');
      if (!SANDBOX_CAVEAT_NAME.test(value))
        throw new CaveatTokenError(
          'CAVEAT_MALFORMED',
          'The sandbox caveat must name a sandbox as the API shows it: lower case letters, digits and "-", at most 63',
        );
      return { kind: 'sandbox', name: value };
    case 'caps':
      expect('in');
      return { kind: 'caps', caps: list(value, isCapability, 'capability') as Capability[] };
    case 'servers':
      expect('in');
      return { kind: 'servers', names: list(value, (n) => CAVEAT_NAME.test(n), 'server') };
    case 'tools':
      expect('in');
      return { kind: 'tools', globs: list(value, (g) => CAVEAT_GLOB.test(g), 'tool pattern') };
    case 'expires': {
      expect('<');
      if (!/^[0-9]{1,12}$/.test(value))
        throw new CaveatTokenError('CAVEAT_MALFORMED', 'The expires caveat takes unix seconds');
      return { kind: 'expires', at: Number(value) };
    }
    default:
      throw new CaveatTokenError('CAVEAT_UNKNOWN', `The token carries a caveat this service does not know ("${key}")`);
  }
}

function encodeToken(macaroon: Macaroon): string {
  return CAVEAT_TOKEN_PREFIX + encode(macaroon).toString('base64url');
}

export function looksLikeCaveatToken(token: string): boolean {
  return token.startsWith(CAVEAT_TOKEN_PREFIX);
}

/** base64url characters of the largest macaroon the decoder reads: longer is refused before decoding */
const MAX_BODY_CHARS = Math.ceil((MAX_MACAROON_BYTES * 4) / 3);

/** `detail` is for the holder's own tools (offline narrowing); what the server answers is always the one refusal. */
function decodeToken(token: string, detail = TOKEN_INVALID_DETAIL): Macaroon {
  const body = token.slice(CAVEAT_TOKEN_PREFIX.length);
  if (!looksLikeCaveatToken(token) || body.length > MAX_BODY_CHARS || !/^[A-Za-z0-9_-]+$/.test(body))
    throw invalidToken(detail);
  try {
    const bytes = Buffer.from(body, 'base64url');
    // base64 has spare bits in its last character: only the canonical spelling is the token
    if (bytes.toString('base64url') !== body) throw new MacaroonFormatError('not canonical base64url');
    return decode(bytes);
  } catch (error) {
    if (error instanceof MacaroonFormatError) throw invalidToken(detail);
    throw error;
  }
}

/** Checks a caveat reads back as itself, so a bad one fails where it is made, not at the far end (a list item holding a separator would read back as two). */
function wire(caveat: Caveat): Buffer {
  const text = caveatText(caveat);
  if (!isDeepStrictEqual(parseCaveat(text), caveat))
    throw new CaveatTokenError('CAVEAT_MALFORMED', `The caveat "${caveat.kind}" is not well formed`);
  return Buffer.from(text, 'utf8');
}

/** Mints a session's token; `derivedKey` is deriveKey(the organisation's session root key). */
export function mintCaveatToken(derivedKey: Buffer, identity: TokenIdentity, caveats: Caveat[]): string {
  return encodeToken(
    mint(
      derivedKey,
      identifierOf(identity),
      [{ kind: 'session', id: identity.sessionId } as Caveat, ...caveats].map(wire),
    ),
  );
}

/** Offline narrowing: anyone holding a token can hand on a weaker one. */
export function attenuateCaveatToken(token: string, caveats: Caveat[]): string {
  const macaroon = decodeToken(token, 'The token is malformed');
  if (macaroon.caveats.length + caveats.length > MAX_CAVEATS)
    throw new CaveatTokenError('CAVEAT_MALFORMED', `A token carries at most ${MAX_CAVEATS} caveats`);
  return encodeToken(attenuate(macaroon, caveats.map(wire)));
}

/** The identity a token claims, before any check: enough to find its key. */
export function peekIdentity(token: string): { identity: TokenIdentity; macaroon: Macaroon } {
  const macaroon = decodeToken(token);
  return { identity: parseIdentifier(macaroon.identifier), macaroon };
}

const matchers = new Map<string, (name: string) => boolean>();
function toolMatcher(globs: string[]): (name: string) => boolean {
  const key = globs.join(',');
  let matcher = matchers.get(key);
  if (!matcher) {
    // not a RegExp: the globs are the token holder's (attenuation is offline), and a backtracking one of `*?*?*?…` stalls on a long tool name;
    // no glob holds a `/` (CAVEAT_GLOB), and `*` and `?` stay within a name's `/`-separated parts, as they always have
    const compiled = globs.map(compileNameGlob);
    matcher = (name: string) => !name.includes('/') && compiled.some((glob) => glob(name));
    if (matchers.size > 10_000) matchers.clear();
    matchers.set(key, matcher);
  }
  return matcher;
}

/**
 * Checks the chain and reads the caveats. `derivedKey` must be the key the
 * identifier names (the caller looks it up from `peekIdentity`). Does not know
 * whether the session is still alive: the caller asks that of its store.
 */
export function verifyCaveatToken(
  macaroon: Macaroon,
  identity: TokenIdentity,
  derivedKey: Buffer,
  nowSeconds: number,
): TokenGrant {
  if (macaroon.caveats.length > MAX_CAVEATS || !chainHolds(derivedKey, macaroon)) throw invalidToken();
  const grant: TokenGrant = {
    ...identity,
    workspaces: [],
    sandboxes: [],
    caps: new Set(SESSION_CAPABILITIES),
    servers: [],
    tools: [],
    toolGlobs: [],
    expiresAt: Number.POSITIVE_INFINITY,
  };
  let caps = new Set<Capability>(SESSION_CAPABILITIES);
  let sawSession = false;
  for (const bytes of macaroon.caveats) {
    const caveat = parseCaveat(bytes.toString('utf8'));
    switch (caveat.kind) {
      case 'session':
        // a token is for one session; a caveat naming another makes it good for none
        if (caveat.id !== identity.sessionId) throw invalidToken();
        sawSession = true;
        break;
      case 'workspace':
        grant.workspaces.push(caveat.id);
        break;
      case 'sandbox':
        grant.sandboxes.push(caveat.name);
        break;
      case 'caps':
        caps = new Set(caveat.caps.filter((c) => caps.has(c)));
        break;
      case 'servers':
        grant.servers.push(caveat.names);
        break;
      case 'tools':
        grant.tools.push(toolMatcher(caveat.globs));
        grant.toolGlobs.push(caveat.globs);
        break;
      case 'expires':
        grant.expiresAt = Math.min(grant.expiresAt, caveat.at);
        break;
    }
  }
  // what we mint always says whose session, where and until when; a token without them is not ours
  if (!sawSession || grant.workspaces.length === 0 || !Number.isFinite(grant.expiresAt)) throw invalidToken();
  grant.caps = caps;
  if (nowSeconds >= grant.expiresAt) throw new CaveatTokenError('TOKEN_EXPIRED', 'The token has expired');
  return grant;
}

/** Whether a verified token allows this request; every caveat must agree. */
export function permits(grant: TokenGrant, request: TokenRequest): boolean {
  if (!grant.caps.has(request.capability)) return false;
  if (!grant.workspaces.every((w) => w === request.workspaceId)) return false;
  // servers, tools and sandboxes narrow the requests that name one; a whole-workspace list is filtered item by item instead
  if (request.server !== undefined && !permitsServer(grant, request.server)) return false;
  if (request.tool !== undefined && !permitsTool(grant, request.tool)) return false;
  if (request.sandbox !== undefined && !grant.sandboxes.every((s) => s === request.sandbox)) return false;
  return true;
}

/** Whether a tool may be seen or called under this grant (lists filter by it). */
export function permitsTool(grant: TokenGrant, tool: string): boolean {
  return grant.tools.every((matches) => matches(tool));
}

/** Whether a server may be reached at all under this grant. */
export function permitsServer(grant: TokenGrant, server: string): boolean {
  return grant.servers.every((names) => names.includes(server));
}
