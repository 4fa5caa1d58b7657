import { join, relative } from 'node:path';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';

/**
 * The data rules the import lint cannot see, because they are about members
 * and types rather than files (docs/rules/tenancy.md):
 * - the Prisma client and a transaction's queries are used in repositories only;
 * - a repository method names its tenant, or says it has none (SystemScope).
 * The compiler already refuses `DatabaseService.client` (it has none); this
 * reads the program with the type checker for what a compiler cannot refuse.
 */
const root = join(__dirname, '../..');
const GENERATED = 'libs/platform/database/src/generated/';
const DATABASE_LIB = 'libs/platform/database/';
const SCOPE_FILE = 'libs/auth/src/scope.ts';
const SCOPES = new Set(['OrgScope', 'WorkspaceScope', 'SystemScope']);

const isRepositoryFile = (file: string): boolean => file.endsWith('.repository.ts');
/** Platform repositories hold installation-wide infrastructure (keys, the outbox) and sit below tenancy: they take no scopes. */
const isDomainRepositoryFile = (file: string): boolean => isRepositoryFile(file) && !file.startsWith('libs/platform/');

let program: ts.Program;
let checker: ts.TypeChecker;
let sources: ts.SourceFile[];

function load(files?: Record<string, string>): void {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} },
  )!;
  const names = config.fileNames.filter(
    (f) => /\/(libs|apps)\//.test(f) && !f.endsWith('.spec.ts') && !f.includes(`/${GENERATED}`),
  );
  const host = ts.createCompilerHost(config.options);
  if (files) {
    const read = host.readFile.bind(host);
    host.readFile = (name) => files[relative(root, name)] ?? read(name);
  }
  // the second load (with fixtures) reuses the first one's parsed files
  program = ts.createProgram({
    rootNames: [...names, ...Object.keys(files ?? {}).map((f) => join(root, f))],
    options: config.options,
    host,
    oldProgram: program,
  });
  checker = program.getTypeChecker();
  sources = program
    .getSourceFiles()
    .filter((s) => !s.isDeclarationFile && /^(libs|apps)\//.test(rel(s)) && !rel(s).startsWith(GENERATED));
}

function rel(node: ts.Node | ts.SourceFile): string {
  return relative(root, (ts.isSourceFile(node) ? node : node.getSourceFile()).fileName);
}

function where(node: ts.Node): string {
  const file = node.getSourceFile();
  return `${rel(file)}:${file.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
}

function declaredIn(symbol: ts.Symbol | undefined, prefix: string): boolean {
  const target = symbol && symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  return (target?.declarations ?? []).some((d) => rel(d).startsWith(prefix));
}

function visit(node: ts.Node, fn: (node: ts.Node) => void): void {
  fn(node);
  node.forEachChild((child) => visit(child, fn));
}

function extendsRepository(cls: ts.ClassLikeDeclaration): boolean {
  for (const clause of cls.heritageClauses ?? []) {
    if (clause.token !== ts.SyntaxKind.ExtendsKeyword) continue;
    for (const type of clause.types) {
      const symbol = checker.getSymbolAtLocation(type.expression);
      const target = symbol && symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      if (target?.name === 'Repository' && declaredIn(target, `${DATABASE_LIB}src/repository.ts`)) return true;
    }
  }
  return false;
}

function memberSymbol(node: ts.PropertyAccessExpression | ts.ElementAccessExpression): ts.Symbol | undefined {
  return checker.getSymbolAtLocation(ts.isPropertyAccessExpression(node) ? node.name : node.argumentExpression);
}

/** The sources to read: all, or only the named ones (the fixtures, whose program is otherwise the one already read). */
function scanned(only?: string[]): ts.SourceFile[] {
  return only ? sources.filter((s) => only.includes(rel(s))) : sources;
}

/** Queries outside repositories: members of the generated client reached from anywhere but a repository or the database library. */
function queriesOutsideRepositories(only?: string[]): string[] {
  const found: string[] = [];
  for (const source of scanned(only)) {
    const file = rel(source);
    if (isRepositoryFile(file) || file.startsWith(DATABASE_LIB)) continue;
    visit(source, (node) => {
      if (!ts.isPropertyAccessExpression(node) && !ts.isElementAccessExpression(node)) return;
      const symbol = memberSymbol(node);
      // the first step into the client only: `tx.toolPin`, not also `tx.toolPin.findMany`
      const inner = node.expression;
      const fromClient =
        (ts.isPropertyAccessExpression(inner) || ts.isElementAccessExpression(inner)) &&
        declaredIn(memberSymbol(inner), GENERATED);
      if (declaredIn(symbol, GENERATED) && !fromClient)
        found.push(`${where(node)} queries the database (${node.getText().slice(0, 60)}): move it into a repository`);
      // the handle's client is the whole database: only the database library and tests hold it
      if (symbol?.name === 'client' && declaredIn(symbol, `${DATABASE_LIB}src/database.ts`))
        found.push(`${where(node)} takes the database handle's client`);
    });
  }
  return found;
}

function repositoriesOutsideRepositoryFiles(only?: string[]): string[] {
  const found: string[] = [];
  for (const source of scanned(only)) {
    visit(source, (node) => {
      if (
        (ts.isClassDeclaration(node) || ts.isClassExpression(node)) &&
        extendsRepository(node) &&
        !isRepositoryFile(rel(source))
      ) {
        found.push(`${where(node)} extends Repository outside a *.repository.ts file`);
      }
    });
  }
  return found;
}

function isScopeType(type: ts.Type): boolean {
  if (type.isUnion()) return type.types.every((t) => isScopeType(t) || (t.flags & ts.TypeFlags.Undefined) !== 0);
  const symbol = type.aliasSymbol ?? type.getSymbol();
  return symbol !== undefined && SCOPES.has(symbol.name) && declaredIn(symbol, SCOPE_FILE);
}

/** Public repository methods with no OrgScope, WorkspaceScope or SystemScope parameter. */
function unscopedRepositoryMethods(only?: string[]): string[] {
  const found: string[] = [];
  for (const source of scanned(only)) {
    if (!isDomainRepositoryFile(rel(source))) continue;
    visit(source, (node) => {
      if (!ts.isClassDeclaration(node) || !extendsRepository(node)) return;
      for (const member of node.members) {
        if (!ts.isMethodDeclaration(member)) continue;
        const modifiers = ts.getCombinedModifierFlags(member);
        if (modifiers & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected) || ts.isPrivateIdentifier(member.name))
          continue;
        const scoped = member.parameters.some((p) => isScopeType(checker.getTypeAtLocation(p)));
        if (!scoped)
          found.push(
            `${where(member)} ${node.name?.text}.${member.name.getText()} takes no tenant scope: add an OrgScope/WorkspaceScope, or a SystemScope if it reaches across tenants on purpose`,
          );
      }
    });
  }
  return found;
}

describe('data access rules', { timeout: 180_000 }, () => {
  beforeAll(() => load(), 180_000);

  it('finds the repositories and scoped methods it checks (the scan is not empty)', () => {
    const repositories = sources.filter((s) => isDomainRepositoryFile(rel(s)));
    expect(repositories.length).toBeGreaterThanOrEqual(10);
  });

  it('only repositories query the database', () => {
    expect(queriesOutsideRepositories()).toEqual([]);
    expect(repositoriesOutsideRepositoryFiles()).toEqual([]);
  });

  it('every public repository method takes a tenant scope, or a SystemScope that says it has none', () => {
    expect(unscopedRepositoryMethods()).toEqual([]);
  });

  it('fails on the mistakes it exists for', () => {
    const emptySlug = 'libs/approvals/src/empty-slug.ts';
    const fixtures = {
      // a workspace scope cannot be made with an empty slug: it does not compile
      [emptySlug]: `import { SystemScopes } from '@aileron/auth/scope-issuer';\nexport const scope = SystemScopes.workspace('org', { id: 'ws', slug: '' });\n`,
      'libs/pool/src/leaky.service.ts': `
        import type { Transaction } from '@aileron/database';
        export async function leak(tx: Transaction) { return tx.toolPin.findMany(); }
      `,
      'libs/pool/src/leaky.ts': `
        import { Repository } from '@aileron/database';
        export class Leaky extends Repository { rows() { return this.client.toolPin.findMany(); } }
      `,
      'libs/pool/src/leaky.repository.ts': `
        import type { WorkspaceScope } from '@aileron/auth';
        import { Repository } from '@aileron/database';
        export class LeakyRepository extends Repository {
          byHash(hash: string) { return this.client.apiToken.findFirst({ where: { tokenHash: hash } }); }
          scoped(scope: WorkspaceScope) { return this.client.toolPin.findMany({ where: { workspaceId: scope.workspaceId } }); }
        }
      `,
    };
    load(fixtures);
    // the rest of the program was read clean by the tests above: reading it again would only take time
    const only = Object.keys(fixtures);
    expect(only.every((file) => sources.some((s) => rel(s) === file))).toBe(true);
    expect(queriesOutsideRepositories(only)).toEqual([
      expect.stringMatching(/^libs\/pool\/src\/leaky\.service\.ts:3 queries the database \(tx\.toolPin\)/),
      expect.stringMatching(/^libs\/pool\/src\/leaky\.ts:3 queries the database \(this\.client\.toolPin\)/),
    ]);
    expect(repositoriesOutsideRepositoryFiles(only)).toEqual([
      expect.stringMatching(/^libs\/pool\/src\/leaky\.ts:3 extends Repository/),
    ]);
    expect(unscopedRepositoryMethods(only)).toEqual([
      expect.stringMatching(/^libs\/pool\/src\/leaky\.repository\.ts:5 LeakyRepository\.byHash takes no tenant scope/),
    ]);
    const diagnostics = ts.getPreEmitDiagnostics(program, program.getSourceFile(join(root, emptySlug)));
    expect(diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('\n')).toMatch(
      /not assignable to type 'never'/,
    );
  });
});
