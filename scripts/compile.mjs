#!/usr/bin/env node
// Compiles the control plane's TypeScript (the files tsconfig.build.json names)
// into dist/, one CommonJS file and source map per source, with swc: the
// transform the tests run (vitest.config.mts), in a few seconds instead of the
// half-minute tsc takes to check every type first. Types are checked by
// `npm run lint` (tsc --noEmit over everything, tests included), which
// `npm test` runs too. tsc-alias then rewrites the @aileron/* imports.
import { mkdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { transformFile } from '@swc/core';

const root = resolve(dirname(new URL(import.meta.url).pathname), '..');
const require = createRequire(import.meta.url);
const ts = require('typescript');

const config = ts.getParsedCommandLineOfConfigFile(
  join(root, 'tsconfig.build.json'),
  {},
  {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
    },
  },
);
const outDir = config.options.outDir;
const sources = config.fileNames.filter((file) => !file.endsWith('.d.ts'));

const options = {
  sourceMaps: true,
  // nodenext's CommonJS output: an import() stays an import(), as tsc leaves it (ES modules and wasm bindings load through it)
  module: { type: 'commonjs', ignoreDynamic: true },
  jsc: {
    target: 'es2022',
    keepClassNames: true,
    parser: { syntax: 'typescript', decorators: true },
    // Nest's dependency injection reads the constructor's parameter types from the decorator metadata
    transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: true },
  },
};

await Promise.all(
  sources.map(async (source) => {
    const out = join(outDir, relative(root, source)).replace(/\.ts$/, '.js');
    const { code, map } = await transformFile(source, {
      ...options,
      filename: source,
      sourceFileName: relative(dirname(out), source),
    });
    await mkdir(dirname(out), { recursive: true });
    await writeFile(out, `${code}\n//# sourceMappingURL=${out.split('/').at(-1)}.map\n`);
    await writeFile(`${out}.map`, map);
  }),
);
process.stdout.write(`compiled ${sources.length} files into ${relative(root, outDir)}/\n`);
