import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

let cached: string | undefined;

/**
 * The project root (where package.json, prisma/ and the built files are), found
 * from this file so it works from source (tests), from dist/ and through the CLI
 * bin link alike.
 */
export function projectRoot(): string {
  if (cached) return cached;
  let dir = __dirname;
  for (;;) {
    const manifest = join(dir, 'package.json');
    if (
      existsSync(manifest) &&
      (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'aileron-control-plane'
    ) {
      return (cached = dir);
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the aileron-control-plane project root above ' + __dirname);
    dir = parent;
  }
}

export function prismaPaths(): { schemaPath: string; migrationsDir: string } {
  const root = projectRoot();
  return { schemaPath: join(root, 'prisma', 'schema.prisma'), migrationsDir: join(root, 'prisma', 'migrations') };
}

/** The embedded mode's owner token, inside the data directory (mode 0600). */
export const ADMIN_TOKEN_FILE = 'admin-token';
