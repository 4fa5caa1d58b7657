import { createHash } from 'node:crypto';

/**
 * Tool names as one MCP endpoint exposes them when it aggregates many servers.
 *
 * Natural name: `<server>__<tool>`, used unchanged when it has at most 64
 * characters, all of them [A-Za-z0-9_-] (the limit and alphabet real clients
 * enforce). Anything else gets a shortened name:
 *
 *   `<server>__<head>_<hash>`
 *
 * - hash: the first 8 characters of lowercase base32 (RFC 4648 alphabet) of
 *   sha256(server + "\u0000" + tool), so it depends on the pair alone;
 * - head: the tool name with every code point outside [A-Za-z0-9_-] replaced by
 *   "-", cut to what fits in 64 characters (it may be empty).
 *
 * Names must be injective over the set exposed together. Duplicate pairs are
 * merged first. Natural names never change: the server has no "__" and does not
 * end in "_", so a natural name splits back at its first "__". Whenever a
 * shortened name equals any other name in the set, each shortened name in that
 * clash takes a longer hash (10, 12, … then all the room there is), and the
 * check repeats until every name is unique. Every step depends only on the set
 * of pairs, never on their order.
 */
export const MAX_TOOL_NAME = 64;
export const HASH_LENGTH = 8;
const HASH_STEP = 2;
const TOOL_NAME = /^[A-Za-z0-9_-]+$/;
/** Catalog names (`[a-z0-9-]`) and tool prefixes (`[a-z0-9_]`), at most 32 characters. */
const NAMESPACE = /^[a-z0-9][a-z0-9_-]{0,31}$/;
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
/** 256 bits of sha256 make 52 base32 characters. */
const MAX_HASH = 52;

export interface NamespacedTool {
  server: string;
  tool: string;
  name: string;
}

export interface ToolPair {
  server: string;
  tool: string;
}

/** `server__tool` when a client accepts it as is, else null. */
export function naturalName(server: string, tool: string): string | null {
  const name = `${server}__${tool}`;
  return name.length <= MAX_TOOL_NAME && TOOL_NAME.test(name) ? name : null;
}

/** The shortened form with a hash of the given length; exported so tests can build clashes. */
export function shortenedName(server: string, tool: string, hashLength: number): string {
  assertNamespace(server);
  return shorten(server, tool, digest(server, tool), hashLength);
}

function shorten(server: string, tool: string, hash: string, hashLength: number): string {
  const longest = maxHashLength(server);
  if (!Number.isInteger(hashLength) || hashLength < 1 || hashLength > longest)
    throw new RangeError(`hash length ${hashLength} outside 1..${longest} for server ${server}`);
  const head = tool.replace(/[^A-Za-z0-9_-]/gu, '-').slice(0, room(server) - hashLength);
  return `${server}__${head}_${hash.slice(0, hashLength)}`;
}

/** Names for every (server, tool) pair exposed together, in input order; the mapping is injective. */
export function namespaceTools(pairs: readonly ToolPair[]): NamespacedTool[] {
  const names = assignNames(pairs);
  return pairs.map(({ server, tool }) => ({ server, tool, name: names.get(pairKey(server, tool))! }));
}

/** Both directions of one endpoint's tool names. */
export class ToolNameTable {
  private readonly names: Map<string, string>;
  private readonly pairs = new Map<string, ToolPair>();

  constructor(pairs: readonly ToolPair[]) {
    this.names = assignNames(pairs);
    for (const { server, tool } of pairs) this.pairs.set(this.names.get(pairKey(server, tool))!, { server, tool });
  }

  nameOf(server: string, tool: string): string | undefined {
    return this.names.get(pairKey(server, tool));
  }

  resolve(name: string): ToolPair | undefined {
    const pair = this.pairs.get(name);
    return pair && { ...pair };
  }
}

interface Candidate {
  server: string;
  tool: string;
  /** null for a natural name, which never changes */
  hashLength: number | null;
  hash: string;
  name: string;
}

function assignNames(pairs: readonly ToolPair[]): Map<string, string> {
  const unique = new Map<string, Candidate>();
  for (const { server, tool } of pairs) {
    assertNamespace(server);
    const key = pairKey(server, tool);
    if (unique.has(key)) continue;
    const natural = naturalName(server, tool);
    if (natural !== null) {
      unique.set(key, { server, tool, hashLength: null, hash: '', name: natural });
    } else {
      const hash = digest(server, tool);
      unique.set(key, { server, tool, hashLength: HASH_LENGTH, hash, name: shorten(server, tool, hash, HASH_LENGTH) });
    }
  }
  for (;;) {
    const claimants = new Map<string, Candidate[]>();
    for (const candidate of unique.values()) {
      const list = claimants.get(candidate.name);
      if (list) list.push(candidate);
      else claimants.set(candidate.name, [candidate]);
    }
    const clashing = [...claimants.values()].filter((list) => list.length > 1);
    if (clashing.length === 0) break;
    for (const list of clashing) {
      for (const candidate of list) {
        if (candidate.hashLength === null) continue;
        const longest = maxHashLength(candidate.server);
        // ~145 bits of sha256 agreeing: not a case to design for, but never hand out one name twice
        if (candidate.hashLength >= longest)
          throw new Error(`cannot name ${candidate.server}/${candidate.tool} uniquely`);
        candidate.hashLength = Math.min(candidate.hashLength + HASH_STEP, longest);
        candidate.name = shorten(candidate.server, candidate.tool, candidate.hash, candidate.hashLength);
      }
    }
  }
  const names = new Map<string, string>();
  for (const [key, candidate] of unique) names.set(key, candidate.name);
  return names;
}

/** Room left for head + hash once `<server>__` and the `_` before the hash are placed. */
function room(server: string): number {
  return MAX_TOOL_NAME - server.length - 3;
}

function maxHashLength(server: string): number {
  return Math.min(room(server), MAX_HASH);
}

function assertNamespace(server: string): void {
  if (!NAMESPACE.test(server) || server.includes('__') || server.endsWith('_')) {
    throw new RangeError(`not a server name or tool prefix: ${JSON.stringify(server)}`);
  }
}

function pairKey(server: string, tool: string): string {
  return `${server}\u0000${tool}`;
}

function digest(server: string, tool: string): string {
  return base32(createHash('sha256').update(pairKey(server, tool), 'utf8').digest());
}

function base32(bytes: Buffer): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
    buffer &= (1 << bits) - 1;
  }
  if (bits > 0) out += BASE32[(buffer << (5 - bits)) & 31];
  return out;
}

export interface NamespacedServer {
  name: string;
  /** the catalog entry's `tool_prefix`, when it has one */
  tool_prefix?: string | null;
}

/**
 * The namespace each server's tools take behind one endpoint: its
 * `tool_prefix` when set, else its name. Two servers must never share one
 * (their tools' names would mix), yet a prefix may equal another server's
 * prefix or name. Then every server in that clash that has a prefix falls
 * back to its own name, and the check repeats until no two share one: names
 * are unique, so it ends, and the outcome depends only on the set of servers.
 */
export function toolNamespaces(servers: readonly NamespacedServer[]): Map<string, string> {
  const chosen = new Map<string, string>();
  for (const { name, tool_prefix } of servers) {
    if (chosen.has(name)) throw new RangeError(`server ${JSON.stringify(name)} is named twice`);
    chosen.set(name, tool_prefix ?? name);
  }
  for (;;) {
    const claimants = new Map<string, string[]>();
    for (const [name, namespace] of chosen) {
      const list = claimants.get(namespace);
      if (list) list.push(name);
      else claimants.set(namespace, [name]);
    }
    let changed = false;
    for (const names of claimants.values()) {
      if (names.length < 2) continue;
      for (const name of names) {
        if (chosen.get(name) === name) continue;
        chosen.set(name, name);
        changed = true;
      }
    }
    if (!changed) return chosen;
  }
}
