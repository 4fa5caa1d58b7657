import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MAX_TOOL_NAME, namespaceTools, shortenedName, ToolNameTable, toolNamespaces, ToolPair } from './tool-names';

const CLIENT_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const SHORTENED = /^(.+?)__(.*)_([a-z2-7]+)$/;

/** mulberry32: the random cases are the same on every run, so a failure reproduces. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pick<T>(next: () => number, items: readonly T[]): T {
  return items[Math.floor(next() * items.length)]!;
}

function text(next: () => number, alphabet: string, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += pick(next, [...alphabet]);
  return out;
}

function shuffled<T>(items: readonly T[], next: () => number): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

function hashOf(name: string): string {
  return SHORTENED.exec(name)![3]!;
}

const LONG_SERVER = 'a'.repeat(32);

describe('namespaced tool names', () => {
  it('keep server__tool when a client accepts it', () => {
    const [tool] = namespaceTools([{ server: 'github', tool: 'create_issue' }]);
    expect(tool).toEqual({ server: 'github', tool: 'create_issue', name: 'github__create_issue' });
    const exact = 'x'.repeat(MAX_TOOL_NAME - 'github__'.length);
    expect(namespaceTools([{ server: 'github', tool: exact }])[0]!.name).toBe(`github__${exact}`);
  });

  it('shorten long names to exactly 64 characters: server, head of the tool, 8-character hash', () => {
    const tool = 'list_all_open_pull_requests_across_every_repository_in_the_organisation';
    const { name } = namespaceTools([{ server: 'github', tool }])[0]!;
    expect(name).toHaveLength(MAX_TOOL_NAME);
    expect(name).toMatch(/^github__list_all_open_pull_requests_across_every_reposi_[a-z2-7]{8}$/);
    expect(namespaceTools([{ server: LONG_SERVER, tool }])[0]!.name).toHaveLength(MAX_TOOL_NAME);
  });

  it('hash: RFC 4648 base32, lowercase, of sha256(server NUL tool), as a gateway computes it', () => {
    const tool = 'x'.repeat(70);
    const bits = [...createHash('sha256').update(`jira\u0000${tool}`).digest()]
      .map((byte) => byte.toString(2).padStart(8, '0'))
      .join('');
    const expected = Array.from(
      { length: 10 },
      (_, i) => 'abcdefghijklmnopqrstuvwxyz234567'[parseInt(bits.slice(i * 5, i * 5 + 5), 2)],
    ).join('');
    expect(shortenedName('jira', tool, 10)).toBe(`jira__${'x'.repeat(64 - 'jira__'.length - 11)}_${expected}`);
  });

  it('replace characters clients refuse, even in short names, and keep the hash so a.b and a/b differ', () => {
    const names = namespaceTools([
      { server: 'files', tool: 'read.file' },
      { server: 'files', tool: 'read/file' },
      { server: 'files', tool: 'read file' },
      { server: 'files', tool: 'read-file' },
      { server: 'files', tool: 'lire_fichier_é' },
    ]).map((t) => t.name);
    expect(names[0]).toMatch(/^files__read-file_[a-z2-7]{8}$/);
    expect(names[3]).toBe('files__read-file');
    expect(names[4]).toMatch(/^files__lire_fichier_-_[a-z2-7]{8}$/);
    expect(new Set(names).size).toBe(5);
    for (const name of names) expect(name).toMatch(CLIENT_NAME);
  });

  it('are the same for the same set in any order, and the same for duplicates', () => {
    const next = random(7);
    const pairs: ToolPair[] = Array.from({ length: 500 }, () => ({
      server: pick(next, ['git', 'jira', LONG_SERVER]),
      tool: text(next, 'ab./ ', 40 + Math.floor(next() * 40)),
    }));
    const first = new ToolNameTable(pairs);
    const again = new ToolNameTable(shuffled([...pairs, ...pairs.slice(0, 50)], next));
    for (const { server, tool } of pairs) expect(again.nameOf(server, tool)).toBe(first.nameOf(server, tool));
    const withDuplicates = namespaceTools([pairs[0]!, pairs[1]!, pairs[0]!]);
    expect(withDuplicates[2]!.name).toBe(withDuplicates[0]!.name);
    expect(withDuplicates[1]!.name).not.toBe(withDuplicates[0]!.name);
  });

  it('resolve back to the pair, and to nothing for unknown names', () => {
    const table = new ToolNameTable([
      { server: 'github', tool: 'create_issue' },
      { server: 'docs', tool: 'search the whole knowledge base for a phrase, fuzzy' },
    ]);
    const name = table.nameOf('docs', 'search the whole knowledge base for a phrase, fuzzy')!;
    expect(table.resolve(name)).toEqual({
      server: 'docs',
      tool: 'search the whole knowledge base for a phrase, fuzzy',
    });
    expect(table.resolve('github__create_issue')).toEqual({ server: 'github', tool: 'create_issue' });
    expect(table.resolve('github__delete_repo')).toBeUndefined();
    expect(table.nameOf('github', 'delete_repo')).toBeUndefined();
  });

  it('refuse a namespace that would make server__tool ambiguous', () => {
    for (const server of ['a__b', 'gh_', 'GitHub', LONG_SERVER + 'a', ''])
      expect(() => namespaceTools([{ server, tool: 't' }])).toThrow(RangeError);
  });
});

describe('collisions', () => {
  it('a natural name keeps its name; the shortened name that equals it takes a longer hash', () => {
    const long = { server: 'db', tool: 'q'.repeat(80) };
    const twin = { server: 'db', tool: shortenedName('db', long.tool, 8).slice('db__'.length) };
    expect(`db__${twin.tool}`).toBe(shortenedName('db', long.tool, 8));

    for (const pairs of [
      [long, twin],
      [twin, long],
    ]) {
      const table = new ToolNameTable(pairs);
      expect(table.nameOf('db', twin.tool)).toBe(`db__${twin.tool}`);
      expect(table.nameOf('db', long.tool)).toBe(shortenedName('db', long.tool, 10));
      expect(hashOf(table.nameOf('db', long.tool)!)).toHaveLength(10);
    }
    expect(namespaceTools([long])[0]!.name).toBe(shortenedName('db', long.tool, 8));
  });

  it('keeps lengthening while the longer name clashes too', () => {
    const long = { server: LONG_SERVER, tool: 'very long tool name '.repeat(5) };
    const twins = [8, 10, 12].map((n) => ({
      server: LONG_SERVER,
      tool: shortenedName(LONG_SERVER, long.tool, n).slice(LONG_SERVER.length + 2),
    }));
    const name = new ToolNameTable([...twins, long]).nameOf(long.server, long.tool)!;
    expect(name).toBe(shortenedName(LONG_SERVER, long.tool, 14));
    expect(name).toHaveLength(MAX_TOOL_NAME);
  });

  it('stay injective over 50,000 random and adversarial pairs', () => {
    const next = random(42);
    const servers = ['a', 'gh', 'github', 'jira-cloud', 'x1', LONG_SERVER, 'b'.repeat(31), 'db_main', 'tools-2'];
    const sharedPrefix = 'p'.repeat(60);
    const pairs: ToolPair[] = [];
    for (let i = 0; i < 50_000; i++) {
      const server = pick(next, servers);
      const kind = i % 5;
      let tool: string;
      if (kind === 0) tool = text(next, 'abcdefghijklmnopqrstuvwxyz_-0123456789', 1 + Math.floor(next() * 70));
      else if (kind === 1) tool = sharedPrefix + text(next, 'xyz', 1 + Math.floor(next() * 4));
      else if (kind === 2) tool = text(next, 'ab./ :é😀', 1 + Math.floor(next() * 12));
      else if (kind === 3) tool = 'c'.repeat(64 - server.length - 2 - 3) + text(next, 'de', 6);
      else {
        // the natural twin of some other pair's shortened name
        const other = text(next, 'fg', 70);
        pairs.push({ server, tool: other });
        tool = shortenedName(server, other, pick(next, [8, 10])).slice(server.length + 2);
      }
      pairs.push({ server, tool });
    }

    const table = new ToolNameTable(pairs);
    const byName = new Map<string, string>();
    for (const { server, tool } of pairs) {
      const name = table.nameOf(server, tool)!;
      expect(name).toMatch(CLIENT_NAME);
      const key = `${server}\u0000${tool}`;
      const owner = byName.get(name);
      if (owner !== undefined && owner !== key)
        expect.fail(`${name} names both ${JSON.stringify(owner)} and ${JSON.stringify(key)}`);
      byName.set(name, key);
      expect(table.resolve(name)).toEqual({ server, tool });
    }
    expect(byName.size).toBe(new Set(pairs.map((p) => `${p.server}\u0000${p.tool}`)).size);
  });
});

describe('tool namespaces: a tool_prefix, else the name', () => {
  it('uses each prefix and the names of servers without one', () => {
    const namespaces = toolNamespaces([
      { name: 'github', tool_prefix: 'gh' },
      { name: 'jira' },
      { name: 'slack', tool_prefix: null },
    ]);
    expect(Object.fromEntries(namespaces)).toEqual({ github: 'gh', jira: 'jira', slack: 'slack' });
  });

  it('two servers with one prefix both fall back to their names', () => {
    const namespaces = toolNamespaces([
      { name: 'github', tool_prefix: 'git' },
      { name: 'gitlab', tool_prefix: 'git' },
      { name: 'jira', tool_prefix: 'j' },
    ]);
    expect(Object.fromEntries(namespaces)).toEqual({ github: 'github', gitlab: 'gitlab', jira: 'j' });
  });

  it("a prefix equal to another server's name gives way to that name, until nothing clashes", () => {
    // github falls back to "github", which then clashes with hub's prefix: hub falls back too
    const servers = [
      { name: 'git' },
      { name: 'github', tool_prefix: 'git' },
      { name: 'hub', tool_prefix: 'github' },
      { name: 'docs', tool_prefix: 'd' },
    ];
    const expected = { git: 'git', github: 'github', hub: 'hub', docs: 'd' };
    expect(Object.fromEntries(toolNamespaces(servers))).toEqual(expected);
    // whatever the order they come in
    const next = random(7);
    for (let round = 0; round < 20; round++)
      expect(Object.fromEntries(toolNamespaces(shuffled(servers, next)))).toEqual(expected);
  });

  it('refuses a list that names a server twice', () => {
    expect(() => toolNamespaces([{ name: 'a' }, { name: 'a', tool_prefix: 'b' }])).toThrow(RangeError);
  });
});
