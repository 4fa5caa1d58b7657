import type { PolicyCall, PolicyDocument } from '../../libs/policy/src';

/*
 * Random policies and calls for the differential test. Vocabularies are kept
 * small on purpose: with a handful of servers, tools, principals and argument
 * paths, rules hit calls often enough that every branch of the decision
 * procedure is exercised thousands of times per run, instead of nearly every
 * pair falling through to the default.
 */

type Rule = PolicyDocument['rules'][number];
type Condition = NonNullable<Rule['arguments']>[number];
type Range = NonNullable<Condition['range']>;

export type Rng = () => number;

// mulberry32: tiny, fast and good enough; reproducibility is what matters here.
export function mulberry32(seed: number): Rng {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function fuzzSeed(env: NodeJS.ProcessEnv = process.env): number {
  const fromEnv = env.POLICY_FUZZ_SEED;
  if (fromEnv !== undefined && fromEnv.trim() !== '') {
    const seed = Number(fromEnv);
    if (!Number.isInteger(seed)) throw new Error(`POLICY_FUZZ_SEED must be an integer, got "${fromEnv}"`);
    return seed >>> 0;
  }
  return (Date.now() ^ Math.floor(Math.random() * 0x100000000)) >>> 0;
}

const chance = (rng: Rng, p: number): boolean => rng() < p;
const int = (rng: Rng, lo: number, hi: number): number => lo + Math.floor(rng() * (hi - lo + 1));
const pick = <T>(rng: Rng, items: readonly T[]): T => items[Math.floor(rng() * items.length)]!;

function shuffle<T>(rng: Rng, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

function someOf<T>(rng: Rng, items: readonly T[], min: number, max: number): T[] {
  return shuffle(rng, items).slice(0, int(rng, min, Math.min(max, items.length)));
}

// Key order is randomised so deep equality is tested independently of it.
function objectOf(rng: Rng, entries: [string, unknown][]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of shuffle(rng, entries)) out[key] = value;
  return out;
}

// --- vocabularies -----------------------------------------------------------

// "git" and "GitHub" are rare on purpose: `git*` must match an empty tail and
// globs are case-sensitive.
const SERVERS = ['github', 'gitlab', 'slack', 'fs'] as const;
const RARE_SERVERS = ['git', 'GitHub'] as const;
const TOOLS = ['create_issue', 'delete_repo', 'gh_search', 'gh_list', 'read_file', 'write_file'] as const;
// Names that trip a glob compiled naively to a RegExp ('.' and '+' unescaped).
const RARE_TOOLS = ['read.file', 'gh_', 'gh__search', 'write', 'gh_+'] as const;

const SERVER_PATTERNS = [
  'github',
  'gitlab',
  'slack',
  'fs',
  'git*',
  '*',
  'g?thub',
  '*lab',
  '?s',
  'GitHub',
  'git?*',
  '**',
  '*hub*',
  'git.ab',
  'gi[t]hub',
];
const TOOL_PATTERNS = [
  ...TOOLS,
  '*_file',
  'gh_?earch',
  '*',
  'gh_*',
  '*_*',
  'delete_*',
  '?',
  'read.file',
  'read_file*',
  'gh_[sl]*',
  'gh_+',
  '*search',
  '???_????',
  'gh_.*',
  // namespaced names: `<server or tool prefix>__<tool>`, and a tool named `gh__search`
  'gh__create_issue',
  'github__*',
  'gh__*',
  '*__read_file',
  'gh__search',
  'fs__?*',
];
const TOOL_PREFIXES = ['gh_', 'write', 'read_', 'delete_repo', 'x', '', 'gh_s', 'gh__', 'github__de', 'g'];
/** the catalog tool prefixes a call's server may have: `git` is also a server's name */
const CALL_TOOL_PREFIXES = ['gh', 'git', 'files'] as const;

const USERS = ['alice', 'bob', 'carol'];
const ROLES = ['admin', 'dev', 'viewer'];
const GROUPS = ['eng', 'ops'];
const GATEWAYS = ['gw-1', 'gw-2'];
const SESSIONS = ['s-1', 's-2'];

// Lexicographic order differs from numeric order ("r10" < "r2") and upper case
// sorts before lower case, so an engine that sorts any other way shows up.
const RULE_IDS = [
  'r1',
  'r2',
  'r3',
  'r10',
  'r11',
  'r20',
  'R5',
  'Z',
  'a',
  'a-1',
  'a_1',
  'allow-all',
  'deny-admin',
  'b',
  'zz',
  '10',
  '9',
  'ß',
  'é',
];
const ROUTES = ['security', 'oncall', 'manager'];

const OWNERS = ['octocat', 'aileron', 'Octocat'];
const REPO_NAMES = ['aileron', 'hello-world', 'README.md'];
const FILE_NAMES = ['README.md', 'readme.md', 'main.ts', 'héllo.txt', ''];
const FLAGS = ['force', 'dry'];
const QUERIES = ['is:open', 'p{L}', '-', 'a-b', '', 'héllo', '42', 'octocat/aileron'];

// Paths for conditions: real ones, plus ones that must resolve as MISSING
// (non-canonical indices, array "length", prototype members, empty segments,
// a key that itself contains a dot).
const PATHS = [
  'repo',
  'repo.owner',
  'repo.name',
  'repo.owner.login',
  'files',
  'files.0',
  'files.0.name',
  'files.1.name',
  'files.01',
  'files.-1',
  'files.length',
  'count',
  'flags',
  'flags.0',
  'flags.force',
  'query',
  'a.b',
  'a',
  '',
  'toString',
  '__proto__',
  'constructor',
  'repo.',
  'ratio',
];
// Non-finite numbers are not JSON, so equality against them is left out of the
// specification's reach; only exists and range look at "ratio".
const EQUALITY_PATHS = PATHS.filter((path) => path !== 'ratio');
const STRING_PATHS = [
  'repo.owner',
  'repo.name',
  'files.0.name',
  'files.0',
  'query',
  'query',
  'repo',
  'count',
  'missing',
];
const NUMBER_PATHS = ['count', 'count', 'ratio', 'ratio', 'files.length', 'repo.owner', 'files.0', 'missing'];

// Valid and invalid patterns; several are valid only without the 'u' flag
// (identity escapes, lone braces), so the flag itself is under test.
const REGEXES = [
  '^octo',
  'cat$',
  '\\d+',
  '.*',
  'a|b',
  '^$',
  '\\p{L}+',
  '^\\p{Lu}',
  '[a-z]+',
  '^README\\.md$',
  'é',
  '^.$',
  'hub',
  '(',
  '[',
  '*',
  'a{2,1}',
  '\\',
  '(?<n>a)(?<n>b)',
  '\\-',
  '{',
  '\\a',
  'x{',
  ')',
];
const BOUNDS = [-1, 0, 2.5, 10, 42];

function scalar(rng: Rng): unknown {
  return pick(rng, [
    'octocat',
    'aileron',
    'README.md',
    '',
    'héllo',
    '42',
    'a.b',
    0,
    -0,
    -1,
    2.5,
    42,
    10,
    1000,
    true,
    false,
    null,
  ]);
}

function repoValue(rng: Rng): unknown {
  const roll = rng();
  if (roll < 0.6) {
    const entries: [string, unknown][] = [
      ['owner', pick(rng, OWNERS)],
      ['name', pick(rng, REPO_NAMES)],
    ];
    if (chance(rng, 0.15)) entries.push(['private', pick(rng, [true, false, null])]);
    if (chance(rng, 0.1)) entries.pop();
    if (chance(rng, 0.1)) entries[0] = ['owner', objectOf(rng, [['login', pick(rng, OWNERS)]])];
    return objectOf(rng, entries);
  }
  if (roll < 0.75) return pick(rng, OWNERS);
  if (roll < 0.85) return null;
  return [pick(rng, OWNERS)];
}

function fileEntry(rng: Rng): unknown {
  const roll = rng();
  if (roll < 0.7)
    return objectOf(
      rng,
      chance(rng, 0.2)
        ? [
            ['name', pick(rng, FILE_NAMES)],
            ['size', pick(rng, [0, 10])],
          ]
        : [['name', pick(rng, FILE_NAMES)]],
    );
  if (roll < 0.9) return pick(rng, FILE_NAMES);
  return null;
}

function filesValue(rng: Rng): unknown {
  const roll = rng();
  if (roll < 0.75) return Array.from({ length: int(rng, 0, 3) }, () => fileEntry(rng));
  // An object with a "0" key resolves "files.0" through the own-key rule.
  if (roll < 0.85) return objectOf(rng, [['0', fileEntry(rng)]]);
  return pick(rng, ['README.md', null, 0]);
}

function countValue(rng: Rng): unknown {
  return pick(rng, [0, -0, -1, 2.5, 10, 42, 1000, 0.5, '10', null, true, [10]]);
}

function flagsValue(rng: Rng): unknown {
  const roll = rng();
  if (roll < 0.5) return someOf(rng, FLAGS, 0, 2);
  if (roll < 0.8)
    return objectOf(
      rng,
      someOf(rng, FLAGS, 0, 2).map((flag) => [flag, pick(rng, [true, false])]),
    );
  return pick(rng, [true, false, null]);
}

// Values that a condition on `path` will plausibly meet in a call, so equality
// comparisons come out true a fair share of the time.
function plausibleValue(rng: Rng, path: string): unknown {
  if (chance(rng, 0.2)) return scalar(rng);
  switch (path) {
    case 'repo':
      return repoValue(rng);
    case 'repo.owner':
      return chance(rng, 0.85) ? pick(rng, OWNERS) : objectOf(rng, [['login', pick(rng, OWNERS)]]);
    case 'repo.name':
      return pick(rng, REPO_NAMES);
    case 'repo.owner.login':
      return pick(rng, OWNERS);
    case 'files':
      return filesValue(rng);
    case 'files.0':
    case 'files.01':
    case 'files.-1':
      return fileEntry(rng);
    case 'files.0.name':
    case 'files.1.name':
      return pick(rng, FILE_NAMES);
    case 'count':
    case 'files.length':
      return countValue(rng);
    case 'flags':
      return flagsValue(rng);
    case 'flags.0':
      return pick(rng, FLAGS);
    case 'flags.force':
      return pick(rng, [true, false]);
    case 'query':
      return pick(rng, QUERIES);
    default:
      return scalar(rng);
  }
}

function randomRange(rng: Rng): Range {
  const range: Range = {};
  // An empty range is allowed (any finite number passes); contradictory bounds
  // such as gt 42 with lt 0 arise naturally and must still error on a
  // missing path rather than being folded to false.
  for (const bound of someOf(rng, ['gt', 'gte', 'lt', 'lte'] as const, 0, 3)) range[bound] = pick(rng, BOUNDS);
  return range;
}

function randomCondition(rng: Rng): Condition {
  const roll = rng();
  if (roll < 0.2) return { path: pick(rng, PATHS), exists: chance(rng, 0.5) };
  if (roll < 0.45) {
    const path = pick(rng, EQUALITY_PATHS);
    return { path, equals: plausibleValue(rng, path) };
  }
  if (roll < 0.6) {
    const path = pick(rng, EQUALITY_PATHS);
    return { path, in: Array.from({ length: int(rng, 0, 3) }, () => plausibleValue(rng, path)) };
  }
  if (roll < 0.8) return { path: pick(rng, STRING_PATHS), regex: pick(rng, REGEXES) };
  return { path: pick(rng, NUMBER_PATHS), range: randomRange(rng) };
}

function randomPrincipals(rng: Rng): NonNullable<Rule['principals']> {
  // An empty match object, or an empty list, names nobody.
  if (chance(rng, 0.05)) return {};
  const out: NonNullable<Rule['principals']> = {};
  const fields = someOf(rng, ['users', 'roles', 'groups', 'gateways', 'sessions'] as const, 1, 2);
  const sources = { users: USERS, roles: ROLES, groups: GROUPS, gateways: GATEWAYS, sessions: SESSIONS };
  for (const field of fields) out[field] = someOf(rng, sources[field], chance(rng, 0.05) ? 0 : 1, 2);
  return out;
}

function randomRule(rng: Rng, id: string): Rule {
  const rule: Rule = { id, effect: pick(rng, ['allow', 'allow', 'deny', 'approval', 'approval'] as const) };
  if (chance(rng, 0.1)) rule.description = 'generated';
  if (chance(rng, 0.5)) rule.approval_route = pick(rng, ROUTES);
  if (chance(rng, 0.35)) rule.servers = someOf(rng, SERVER_PATTERNS, chance(rng, 0.03) ? 0 : 1, 3);
  if (chance(rng, 0.4)) rule.tools = someOf(rng, TOOL_PATTERNS, chance(rng, 0.03) ? 0 : 1, 3);
  if (chance(rng, 0.2)) rule.tool_prefixes = someOf(rng, TOOL_PREFIXES, chance(rng, 0.05) ? 0 : 1, 2);
  if (chance(rng, 0.2)) rule.execution_mode = pick(rng, ['local', 'remote'] as const);
  if (chance(rng, 0.25)) rule.principals = randomPrincipals(rng);
  if (chance(rng, 0.5)) rule.arguments = Array.from({ length: int(rng, 0, 3) }, () => randomCondition(rng));
  return rule;
}

export function randomPolicy(rng: Rng): PolicyDocument {
  const count = int(rng, 0, 12);
  const unused = shuffle(rng, RULE_IDS);
  const rules: Rule[] = [];
  for (let i = 0; i < count; i++) {
    const duplicate = rules.length > 0 && chance(rng, 0.1);
    const id = duplicate ? pick(rng, rules).id : unused.pop()!;
    rules.push(randomRule(rng, id));
  }
  // With duplicate ids, "the first rule by sorted id that has a route" is
  // ambiguous between two different routes; rules sharing an id therefore
  // share the route of the first of them (which may be none).
  const routeById = new Map<string, string | undefined>();
  for (const rule of rules) {
    if (!routeById.has(rule.id)) routeById.set(rule.id, rule.approval_route);
    const route = routeById.get(rule.id);
    if (route === undefined) delete rule.approval_route;
    else rule.approval_route = route;
  }
  const document: PolicyDocument = { rules };
  if (chance(rng, 0.4)) document.default = pick(rng, ['allow', 'deny'] as const);
  if (chance(rng, 0.4)) document.on_error = pick(rng, ['deny', 'approval'] as const);
  return document;
}

function randomArguments(rng: Rng): Record<string, unknown> {
  const entries: [string, unknown][] = [];
  if (chance(rng, 0.7)) entries.push(['repo', repoValue(rng)]);
  if (chance(rng, 0.6)) entries.push(['files', filesValue(rng)]);
  if (chance(rng, 0.6)) entries.push(['count', countValue(rng)]);
  if (chance(rng, 0.4)) entries.push(['flags', flagsValue(rng)]);
  if (chance(rng, 0.5)) entries.push(['query', pick(rng, [...QUERIES, 7, null])]);
  if (chance(rng, 0.3)) entries.push(['ratio', pick(rng, [0.5, 3, Infinity, -Infinity, NaN, '0.5'])]);
  // A literal key "a.b" must not satisfy the path "a.b" (which means a → b).
  if (chance(rng, 0.1)) entries.push(['a.b', 'dotted']);
  if (chance(rng, 0.1)) entries.push(['a', chance(rng, 0.5) ? objectOf(rng, [['b', 'nested']]) : 'flat']);
  if (chance(rng, 0.05)) entries.push(['', 'empty-key']);
  return objectOf(rng, entries);
}

function randomCallPrincipal(rng: Rng): NonNullable<PolicyCall['principal']> {
  const principal: NonNullable<PolicyCall['principal']> = {};
  if (chance(rng, 0.7)) principal.user = pick(rng, [...USERS, 'mallory']);
  if (chance(rng, 0.6)) principal.roles = someOf(rng, ROLES, 0, 2);
  if (chance(rng, 0.5)) principal.groups = someOf(rng, GROUPS, 0, 2);
  if (chance(rng, 0.5)) principal.gateway = pick(rng, [...GATEWAYS, 'gw-9']);
  if (chance(rng, 0.4)) principal.session = pick(rng, [...SESSIONS, 's-9']);
  return principal;
}

export function randomCall(rng: Rng): PolicyCall {
  const call: PolicyCall = {
    server: chance(rng, 0.08) ? pick(rng, RARE_SERVERS) : pick(rng, SERVERS),
    tool: chance(rng, 0.1) ? pick(rng, RARE_TOOLS) : pick(rng, TOOLS),
  };
  const argsRoll = rng();
  if (argsRoll < 0.8) call.arguments = randomArguments(rng);
  else if (argsRoll < 0.88) call.arguments = {};
  if (chance(rng, 0.75)) call.principal = randomCallPrincipal(rng);
  if (chance(rng, 0.6)) call.execution_mode = pick(rng, ['local', 'remote'] as const);
  if (chance(rng, 0.4)) call.tool_prefix = pick(rng, CALL_TOOL_PREFIXES);
  return call;
}
