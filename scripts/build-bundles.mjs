#!/usr/bin/env node
// Bundles the programs that run where no node_modules sits beside them into one
// self-contained file each. Run by `npm run build`, after tsc.
// - apps/aileron-mcp → dist/aileron-mcp.cjs: bind-mounted read-only into agent containers;
// - apps/sandbox-runner → dist/sandbox-runner/runner.cjs, alone in its directory: the one
//   program of ours inside a sandbox (bubblewrap locally binds that directory, both
//   containers of a pod run it from the image);
// - apps/git-helper → dist/git-helper.cjs: the local driver's process that spawns the
//   history's gits, started with a small heap.
import { chmodSync, readFileSync, rmSync } from 'node:fs';
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
// nothing else in the runner's directory: the local driver binds all of it into every sandbox
rmSync('dist/sandbox-runner', { recursive: true, force: true });
await bundle('apps/sandbox-runner/src/main.ts', 'dist/sandbox-runner/runner.cjs');
await bundle('apps/git-helper/src/main.ts', 'dist/git-helper.cjs');
