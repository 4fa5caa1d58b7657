#!/usr/bin/env node
// Bundles apps/aileron-mcp into one self-contained file, dist/aileron-mcp.cjs:
// it is bind-mounted read-only into agent containers, where no node_modules
// sits beside it. Run by `npm run build`, after tsc.
import { chmodSync, readFileSync } from 'node:fs';
import { build } from 'rolldown';

const OUT = 'dist/aileron-mcp.cjs';
const { version } = JSON.parse(readFileSync('package.json', 'utf8'));

await build({
  input: 'apps/aileron-mcp/src/main.ts',
  platform: 'node',
  // the @aileron/* path aliases
  tsconfig: 'tsconfig.json',
  transform: { define: { __AILERON_MCP_VERSION__: JSON.stringify(version) } },
  logLevel: 'warn',
  output: {
    file: OUT,
    format: 'cjs',
    banner: '#!/usr/bin/env node',
    codeSplitting: false,
  },
});
chmodSync(OUT, 0o755);
