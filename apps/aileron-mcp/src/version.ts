import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** Set by the bundler (scripts/build-bundles.mjs) from package.json. */
declare const __AILERON_MCP_VERSION__: string | undefined;

/** The package version; unbundled (tsc output, tests) it is read from the package.json above this file. */
export function version(): string {
  if (typeof __AILERON_MCP_VERSION__ === 'string') return __AILERON_MCP_VERSION__;
  for (let dir = __dirname; ; dir = dirname(dir)) {
    const candidate = join(dir, 'package.json');
    if (existsSync(candidate)) return (JSON.parse(readFileSync(candidate, 'utf8')) as { version: string }).version;
    if (dirname(dir) === dir) return '0.0.0';
  }
}
