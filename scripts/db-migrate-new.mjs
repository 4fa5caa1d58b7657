#!/usr/bin/env node
// Creates the next Prisma migration from prisma/schema.prisma:
//
//   npm run db:migrate:new -- <name>        (package.json: "node scripts/db-migrate-new.mjs")
//   node scripts/db-migrate-new.mjs <name>
//
// writes prisma/migrations/<YYYYMMDDHHMMSS>_<name>/migration.sql (and
// migration_lock.toml the first time), or prints "no changes". No database is
// needed: the existing migrations are replayed into an in-memory PGlite (see
// createMigration in libs/platform/database/src/migrator/).
//
// Plain JavaScript because Node 20 cannot run TypeScript and tsx is not
// installed. Rather than requiring a build, it transpiles the migrator's folder
// (which imports no path aliases for this reason) with the project's TypeScript
// into .tmp/, so it always runs the current source, even while other code does
// not compile.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

const args = process.argv.slice(2);
if (args.length !== 1 || args[0] === '--help' || args[0] === '-h') {
  console.error('usage: npm run db:migrate:new -- <name>   (name: [a-z0-9_]+, e.g. add_audit_log)');
  process.exit(args[0] === '--help' || args[0] === '-h' ? 0 : 2);
}
const name = args[0];
if (!/^[a-z0-9_]+$/.test(name)) {
  console.error(`invalid migration name "${name}": use lower-case letters, digits and underscores`);
  process.exit(2);
}

function loadMigrator() {
  const ts = require('typescript');
  const sources = join(root, 'libs/platform/database/src/migrator');
  // Inside the project, so that its node_modules resolve; .tmp/ is git-ignored.
  const out = join(root, '.tmp/db-migrate-new/migrator');
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  for (const file of readdirSync(sources).filter((name) => name.endsWith('.ts') && !name.endsWith('.spec.ts'))) {
    const { outputText } = ts.transpileModule(readFileSync(join(sources, file), 'utf8'), {
      // .cts + NodeNext keeps `await import()` (the wasm bindings are ESM) as a real import.
      fileName: file.replace(/\.ts$/, '.cts'),
      compilerOptions: {
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        target: ts.ScriptTarget.ES2022,
        esModuleInterop: true,
      },
    });
    // .js under the project's package.json (no "type"): CommonJS, found by the files' `require('./x')`
    writeFileSync(join(out, file.replace(/\.ts$/, '.js')), outputText);
  }
  return require(join(out, 'index.js'));
}

try {
  const { createMigration } = loadMigrator();
  const result = await createMigration(name, {
    schemaPath: join(root, 'prisma/schema.prisma'),
    migrationsDir: join(root, 'prisma/migrations'),
    now: new Date(),
  });
  if (result === null) console.log('no changes: the schema matches the existing migrations');
  else console.log(`created ${relative(process.cwd(), join(result.dir, 'migration.sql'))}`);
} catch (error) {
  console.error(`db:migrate:new failed: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
}
