import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(__dirname, '..', '..');

/** Files not named after one exported class, each with why (docs/rules/file-names.md). */
const EXCEPTIONS: Record<string, string> = {
  'libs/platform/bus/src/message-bus.ts':
    'the MessageBus interface and both its implementations, InProcessBus and RedisBus',
  'libs/platform/queue/src/bullmq.queue.ts': 'BullMqQueue, with BullMQ written as the product spells it (one word)',
  'libs/audit/src/domain/chain.ts':
    "the audit chain's rules (canonical record, hashing, chaining, checkpoints); ChainVerifier is one of them",
  'libs/catalog/src/domain/tool-names.ts':
    'the tool-name rules (natural, shortened and namespaced names); ToolNameTable is one of them',
  'libs/platform/http/src/pagination.ts': 'the paging rules (query, page view, cursor keys); ListCursor is one of them',
  'libs/platform/keys/src/root-keyring.ts':
    "the root keyring's key file (parse, load, prepend); LocalKeyProvider is one of them",
  'libs/sandboxes/src/drivers/local-limits.ts':
    "a local sandbox's limits: constants, memory sizing, default limits, and its two bounds MemoryBound and SrcBound",
  'libs/sandboxes/src/domain/shell-rules/shell-errors.ts':
    "the shell rules' two errors, ShellSyntaxError and ShellRulesError",
  'apps/sandbox-runner/src/ops/scan.ts':
    "the runner's operations are named by op (exec, files, grep, scan): TreeScanner is the scan",
};

/** `export class X`, `export abstract class X`, `@Injectable() export class X` */
const EXPORTED_CLASS =
  /^[ \t]*(?:@[\w.]+\([^)\n]*\)[ \t]*)*export[ \t]+(?:default[ \t]+)?(?:abstract[ \t]+)?class[ \t]+(\w+)(?:<[^>\n]*>)?(?:[ \t]+extends[ \t]+([\w.]+))?/gm;
/** any other export: a function, a constant, a type, a re-export */
const OTHER_EXPORT = /^[ \t]*export[ \t]+(?!(?:default[ \t]+)?(?:abstract[ \t]+)?class\b)/m;

function sources(dir: string): string[] {
  if (!existsSync(join(ROOT, dir))) return [];
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'generated' || entry.name === 'node_modules' ? [] : sources(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') && !entry.name.endsWith('.d.ts')
      ? [path]
      : [];
  });
}

/** Every `src` folder of every library and app. */
function sourceFolders(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && entry.name !== 'node_modules')
    .flatMap((entry) => (entry.name === 'src' ? [join(dir, 'src')] : sourceFolders(join(dir, entry.name))));
}

function kebab(name: string): string {
  return name
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1-$2')
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .toLowerCase();
}

/** `foo-bar.service.ts` is the file of FooBarService and of FooBar; `foo-bar.ts` of FooBar. */
function namesFile(className: string, file: string): boolean {
  const [stem, ...roles] = basename(file, '.ts').split('.');
  return kebab(className) === [stem, ...roles].join('-') || kebab(className) === stem;
}

/** The name the file of `className` would have, keeping the role `file` has (`.service`, `.controller`, …). */
function fileFor(className: string, file: string): string {
  const roles = basename(file, '.ts').split('.').slice(1);
  const name = kebab(className);
  const role = roles.join('-');
  if (roles.length === 0) return `${name}.ts`;
  return `${name.endsWith(`-${role}`) ? name.slice(0, -role.length - 1) : name}.${roles.join('.')}.ts`;
}

/** An error: named one, or made from one (`class ApiProblem extends Error`). */
function isError(name: string, base: string | undefined): boolean {
  return name.endsWith('Error') || (base?.endsWith('Error') ?? false);
}

/**
 * The class a file is for, if it is for one: its exported classes, errors
 * left out (they live beside what throws them), unless the file is errors
 * and nothing else.
 */
function mainClasses(text: string): string[] {
  const found = [...text.matchAll(EXPORTED_CLASS)].map(([, name, base]) => ({
    name: name!,
    error: isError(name!, base),
  }));
  const others = found.filter((c) => !c.error).map((c) => c.name);
  if (others.length > 0) return others;
  return found.length > 0 && !OTHER_EXPORT.test(text) ? found.map((c) => c.name) : [];
}

function misnamed(): string[] {
  const folders = [...sourceFolders('libs'), ...sourceFolders('apps')];
  return folders
    .flatMap((folder) => sources(folder))
    .map((path) => relative(ROOT, join(ROOT, path)))
    .filter((path) => EXCEPTIONS[path] === undefined)
    .flatMap((path) => {
      const classes = mainClasses(readFileSync(join(ROOT, path), 'utf8'));
      if (classes.length === 0 || classes.some((name) => namesFile(name, path))) return [];
      return [`${path}: ${classes.join(', ')} (${classes.map((name) => fileFor(name, path)).join(' or ')})`];
    });
}

/**
 * A reader who meets a class finds its file by its name, and a file's name
 * says what is in it: PoolSessions in sessions.service.ts sat beside the
 * agent sessions' sessions.service.ts, and neither name said which sessions.
 */
describe('file names', () => {
  it('turn class names into kebab-case', () => {
    expect(kebab('McpSessions')).toBe('mcp-sessions');
    expect(kebab('NodeStreamableHttpTransport')).toBe('node-streamable-http-transport');
    expect(kebab('OIDCSignIn')).toBe('oidc-sign-in');
  });

  it('are the kebab-case of the class a file exports (with its role: foo-bar.service.ts for FooBar or FooBarService)', () => {
    expect(misnamed()).toEqual([]);
  });

  it('have exceptions only for files that still need one', () => {
    const stale = Object.keys(EXCEPTIONS).filter((path) => {
      if (!existsSync(join(ROOT, path))) return true;
      const classes = mainClasses(readFileSync(join(ROOT, path), 'utf8'));
      return classes.length === 0 || classes.some((name) => namesFile(name, path));
    });
    expect(stale).toEqual([]);
  });
});
