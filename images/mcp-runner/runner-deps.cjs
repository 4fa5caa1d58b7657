#!/usr/bin/env node
'use strict';
// Usage: runner-deps.cjs <from> <to> <package>...
// Copies the packages and everything they depend on at run time from
// <from>/node_modules to <to>/node_modules, where Node would resolve them,
// so the runner image holds exactly the versions the lock file installed
// and nothing else of the control plane's dependencies.
const { cpSync, existsSync, readFileSync } = require('node:fs');
const { dirname, join, relative } = require('node:path');

const [from, to, ...roots] = process.argv.slice(2);
if (!from || !to || roots.length === 0) {
  process.stderr.write('usage: runner-deps.cjs <from> <to> <package>...\n');
  process.exit(2);
}

/** Where Node finds `name` for code in `dir`: the nearest node_modules above it. */
function resolvePackage(name, dir) {
  for (let at = dir; ; at = dirname(at)) {
    const candidate = join(at, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (at === from || dirname(at) === at) return undefined;
  }
}

const found = new Set();
const pending = roots.map((name) => ({ name, dir: from, optional: false }));
while (pending.length > 0) {
  const { name, dir, optional } = pending.pop();
  const where = resolvePackage(name, dir);
  if (where === undefined) {
    // an optional dependency for another platform is simply not installed
    if (optional) continue;
    process.stderr.write(
      `runner-deps: ${name} (needed by ${relative(from, dir) || 'the root'}) is not installed under ${from}\n`,
    );
    process.exit(1);
  }
  if (found.has(where)) continue;
  found.add(where);
  const manifest = JSON.parse(readFileSync(join(where, 'package.json'), 'utf8'));
  for (const dep of Object.keys(manifest.dependencies ?? {})) pending.push({ name: dep, dir: where, optional: false });
  for (const dep of Object.keys(manifest.optionalDependencies ?? {}))
    pending.push({ name: dep, dir: where, optional: true });
  // npm 7+ installs required peers; an optional one is used only if the package is there
  for (const dep of Object.keys(manifest.peerDependencies ?? {})) {
    pending.push({ name: dep, dir: where, optional: manifest.peerDependenciesMeta?.[dep]?.optional === true });
  }
}

for (const where of found) {
  // a package's own nested node_modules is copied when the packages in it are found, not wholesale
  cpSync(where, join(to, relative(from, where)), {
    recursive: true,
    filter: (source) => !relative(where, source).split(/[\\/]/).includes('node_modules'),
  });
}
process.stdout.write(`runner-deps: ${found.size} package(s) copied to ${join(to, 'node_modules')}\n`);
