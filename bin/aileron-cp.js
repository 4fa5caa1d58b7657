#!/usr/bin/env node
'use strict';
// The CLI is compiled with the rest of the project; this file only finds it.
const { existsSync } = require('node:fs');
const { join } = require('node:path');

const root = join(__dirname, '..');
const entry = join(root, 'dist', 'apps', 'cli', 'src', 'main.js');
if (!existsSync(entry)) {
  process.stderr.write(`aileron-cp: the CLI is not built (${entry} is missing): run \`npm run build\` in ${root}\n`);
  process.exit(1);
}
require(entry);
