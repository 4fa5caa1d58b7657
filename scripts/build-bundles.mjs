#!/usr/bin/env node
// Bundles the programs that run where no node_modules sits beside them into one
// self-contained file each. Run by `npm run build`, after tsc.
// - apps/aileron-mcp → dist/aileron-mcp.cjs: bind-mounted read-only into agent containers;
// - the sandbox runner → over tsc's dist/libs/sandboxes/src/runner/runner.js: the one
//   program of ours inside a sandbox (bubblewrap locally, both containers of a pod).
import { chmodSync, readFileSync } from 'node:fs';
import { build } from 'rolldown';

const { version } = JSON.parse(readFileSync('package.json', 'utf8'));

async function bundle(input, file, options = {}) {
  await build({
    input,
    platform: 'node',
    // the @aileron/* path aliases
    tsconfig: 'tsconfig.json',
    transform: { define: { __AILERON_MCP_VERSION__: JSON.stringify(version) } },
    logLevel: 'warn',
    output: { file, format: 'cjs', codeSplitting: false, ...options },
  });
}

await bundle('apps/aileron-mcp/src/main.ts', 'dist/aileron-mcp.cjs', { banner: '#!/usr/bin/env node' });
chmodSync('dist/aileron-mcp.cjs', 0o755);
await bundle('libs/sandboxes/src/runner/runner.ts', 'dist/libs/sandboxes/src/runner/runner.js');
