// The data rules the import lint cannot see, because they are about members
// and types rather than files (docs/rules/tenancy.md):
// - the Prisma client and a transaction's queries are used in repositories only;
// - a repository method names its tenant, or says it has none (SystemScope).
// The compiler already refuses `DatabaseService.client` (it has none); these
// read a program with its type checker for what a compiler cannot refuse.
// `npm run lint` runs them over the program it has just type-checked
// (scripts/lint-types.mjs); test/architecture/data-access.test.ts runs them
// over a small program of the mistakes they exist for.
import { relative } from 'node:path';

const GENERATED = 'libs/platform/database/src/generated/';
const DATABASE_LIB = 'libs/platform/database/';
const SCOPE_FILE = 'libs/auth/src/scope.ts';
const SCOPES = new Set(['OrgScope', 'WorkspaceScope', 'SystemScope']);

const isRepositoryFile = (file) => file.endsWith('.repository.ts');
/** Platform repositories hold installation-wide infrastructure (keys, the outbox) and sit below tenancy: they take no scopes. */
export const isDomainRepositoryFile = (file) => isRepositoryFile(file) && !file.startsWith('libs/platform/');

/**
 * Every breach of the data rules in `program`, one line each (`file:line what`).
 * @param {typeof import('typescript')} ts
 * @param {import('typescript').Program} program
 * @param {string} root the project's root: the rules name files relative to it
 */
export function dataAccessProblems(ts, program, root) {
  const checker = program.getTypeChecker();
  const rel = (node) => relative(root, (ts.isSourceFile(node) ? node : node.getSourceFile()).fileName);
  const where = (node) => {
    const file = node.getSourceFile();
    return `${rel(file)}:${file.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
  };
  const resolved = (symbol) =>
    symbol && symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
  const declaredIn = (symbol, prefix) => (resolved(symbol)?.declarations ?? []).some((d) => rel(d).startsWith(prefix));
  const visit = (node, fn) => {
    fn(node);
    node.forEachChild((child) => visit(child, fn));
  };
  const memberSymbol = (node) =>
    checker.getSymbolAtLocation(ts.isPropertyAccessExpression(node) ? node.name : node.argumentExpression);
  const isMemberAccess = (node) => ts.isPropertyAccessExpression(node) || ts.isElementAccessExpression(node);
  const extendsRepository = (cls) =>
    (cls.heritageClauses ?? []).some(
      (clause) =>
        clause.token === ts.SyntaxKind.ExtendsKeyword &&
        clause.types.some((type) => {
          const target = resolved(checker.getSymbolAtLocation(type.expression));
          return target?.name === 'Repository' && declaredIn(target, `${DATABASE_LIB}src/repository.ts`);
        }),
    );
  const isScopeType = (type) => {
    if (type.isUnion()) return type.types.every((t) => isScopeType(t) || (t.flags & ts.TypeFlags.Undefined) !== 0);
    const symbol = type.aliasSymbol ?? type.getSymbol();
    return symbol !== undefined && SCOPES.has(symbol.name) && declaredIn(symbol, SCOPE_FILE);
  };

  const found = [];
  const sources = program
    .getSourceFiles()
    .filter((s) => !s.isDeclarationFile && /^(libs|apps)\//.test(rel(s)) && !rel(s).startsWith(GENERATED));
  for (const source of sources) {
    const file = rel(source);
    if (file.endsWith('.spec.ts')) continue;
    const mayQuery = isRepositoryFile(file) || file.startsWith(DATABASE_LIB);
    visit(source, (node) => {
      if (!mayQuery && isMemberAccess(node)) {
        const symbol = memberSymbol(node);
        // the first step into the client only: `tx.toolPin`, not also `tx.toolPin.findMany`
        const fromClient = isMemberAccess(node.expression) && declaredIn(memberSymbol(node.expression), GENERATED);
        if (declaredIn(symbol, GENERATED) && !fromClient)
          found.push(`${where(node)} queries the database (${node.getText().slice(0, 60)}): move it into a repository`);
        // the handle's client is the whole database: only the database library and tests hold it
        if (symbol?.name === 'client' && declaredIn(symbol, `${DATABASE_LIB}src/database.ts`))
          found.push(`${where(node)} takes the database handle's client`);
      }
      if ((ts.isClassDeclaration(node) || ts.isClassExpression(node)) && extendsRepository(node)) {
        if (!isRepositoryFile(file)) found.push(`${where(node)} extends Repository outside a *.repository.ts file`);
        else if (isDomainRepositoryFile(file) && ts.isClassDeclaration(node))
          for (const member of node.members) {
            if (!ts.isMethodDeclaration(member)) continue;
            const modifiers = ts.getCombinedModifierFlags(member);
            if (
              modifiers & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected) ||
              ts.isPrivateIdentifier(member.name)
            )
              continue;
            if (!member.parameters.some((p) => isScopeType(checker.getTypeAtLocation(p))))
              found.push(
                `${where(member)} ${node.name?.text}.${member.name.getText()} takes no tenant scope: add an OrgScope/WorkspaceScope, or a SystemScope if it reaches across tenants on purpose`,
              );
          }
      }
    });
  }
  return found;
}

/** The domain repository files of `program`: a scan that finds none reads the wrong program. */
export function domainRepositoryFiles(ts, program, root) {
  return program
    .getSourceFiles()
    .map((s) => relative(root, s.fileName))
    .filter(isDomainRepositoryFile);
}
