#!/usr/bin/env node
// The type check and ESLint of `npm run lint`, over one TypeScript program per
// tsconfig. ESLint's type-aware rules (no-floating-promises, no-misused-promises)
// need the same program `tsc --noEmit` builds and checks; run separately, each
// parsed and checked all of it again (about 45 s of CPU each, beside the tests).
// Here the compiler checks each program once, and ESLint reads its types from
// the programs already checked.
//
// `npm run lint` gives it --max-semi-space-size=32: the compiler makes many short-lived objects, and with V8's
// default young generation a quarter of its CPU went to collecting them; 32 MB semi-spaces: 59 CPU-s against 65.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { dataAccessProblems, domainRepositoryFiles } from './data-access-rules.mjs';

const require = createRequire(import.meta.url);
const ts = require('typescript');
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
// The control plane, its tests and tools; and the web console (a tsconfig of its own: DOM, bundler), whose types
// import the API types the build generates from the controllers (scripts/build-web.mjs): `npm test` lints after the
// build. The build itself checks no type (a whole program of its own before the tests could start, ~9 CPU-s).
const TSCONFIGS = [
  { path: 'tsconfig.json', dataAccess: true },
  { path: 'apps/web/tsconfig.json', dataAccess: false },
];

function program({ path: tsconfig, dataAccess }) {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(root, tsconfig),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  );
  if (parsed.errors.length > 0) return { program: undefined, diagnostics: parsed.errors };
  const program = ts.createProgram({
    rootNames: parsed.fileNames,
    options: parsed.options,
    projectReferences: parsed.projectReferences,
  });
  return {
    program,
    diagnostics: ts.getPreEmitDiagnostics(program),
    problems: dataAccess ? dataRules(program) : [],
  };
}

/** The data access rules (scripts/data-access-rules.mjs), over the program just checked. */
function dataRules(checked) {
  // a scan that finds no repository reads the wrong program, and would pass whatever the code does
  if (domainRepositoryFiles(ts, checked, root).length < 10)
    return ['the data access rules found no repositories to read'];
  return dataAccessProblems(ts, checked, root);
}

// the console's API types come from the compiled controllers: without them every API call would be a type error
if (!existsSync(join(root, 'apps/web/src/api/schema.gen.ts'))) {
  process.stdout.write(
    "the web console's API types are not generated (apps/web/src/api/schema.gen.ts): run `npm run build` first\n",
  );
  process.exit(1);
}

const host = {
  getCanonicalFileName: (name) => name,
  getCurrentDirectory: () => root,
  getNewLine: () => '\n',
};
let failed = false;
const programs = [];
for (const tsconfig of TSCONFIGS) {
  const { program: checked, diagnostics, problems = [] } = program(tsconfig);
  if (checked) programs.push(checked);
  if (problems.length > 0) {
    failed = true;
    process.stdout.write(
      `${problems.join('\n')}\n\n${problems.length} data access rule(s) broken (docs/rules/tenancy.md)\n`,
    );
  }
  if (diagnostics.length > 0) {
    failed = true;
    process.stdout.write(ts.formatDiagnosticsWithColorAndContext(diagnostics, host));
    process.stdout.write(`\n${diagnostics.length} type error(s) in ${tsconfig.path}\n`);
  }
}

if (programs.length === TSCONFIGS.length) {
  const eslint = new ESLint({
    cwd: root,
    overrideConfig: { languageOptions: { parserOptions: { projectService: false, programs } } },
  });
  const results = await eslint.lintFiles(['.']);
  const problems = results.reduce((n, r) => n + r.errorCount + r.warningCount, 0);
  if (problems > 0) {
    failed = true;
    const formatter = await eslint.loadFormatter('stylish');
    process.stdout.write(await formatter.format(results));
  }
}
process.exit(failed ? 1 : 0);
