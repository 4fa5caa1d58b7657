import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { gzipSync } from 'node:zlib';

/**
 * The console's own Content-Security-Policy: scripts only from files we serve
 * (no inline script, no eval), data only from our own API, never framed.
 * Styles come from our CSS files, plus the <style> elements Mantine writes
 * for responsive layouts (AppShell, Grid), which carry this response's nonce
 * (the page's `csp-nonce` meta, read by MantineProvider's getStyleNonce): no
 * 'unsafe-inline', and a nonce that allows styles only, never scripts.
 */
export function consoleCsp(styleNonce: string): string {
  return CONSOLE_CSP.replace("style-src 'self'", `style-src 'self' 'nonce-${styleNonce}'`);
}

/** The policy with the per-response style nonce left out (consoleCsp adds it). */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** First path segments the console never answers, whatever apps/web/src/sections.json says: the API, MCP and the server's own pages. */
export const RESERVED_SEGMENTS = new Set([
  'v1',
  'mcp',
  'docs',
  'review',
  'healthz',
  'readyz',
  'metrics',
  '.well-known',
  'assets',
]);

const TYPES: Record<string, string> = {
  '.js': 'application/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.json': 'application/json; charset=utf-8',
};

export interface ConsoleFile {
  body: Buffer;
  /** the same body gzipped, when that is smaller */
  gzipped: Buffer | null;
  type: string;
}

/** What a GET of a path answers: a hashed asset, the page (for `/` and the console's sections), or nothing (not the console's). */
export type ConsoleTarget = { kind: 'page' } | { kind: 'asset'; name: string } | null;

/**
 * Which requests the console answers. The page for `/` and for paths under
 * one of its sections (client-side routes, so a reload or a shared link
 * works); a file for `/assets/<name>`. Nothing else: an unknown path under
 * `/v1` or `/mcp` keeps its 404 problem, because no catch-all sits in front.
 */
export function consoleTarget(url: string, sections: ReadonlySet<string>): ConsoleTarget {
  const path = url.split('?', 1)[0]!;
  if (path === '/') return { kind: 'page' };
  const asset = /^\/assets\/([A-Za-z0-9_.-]+)$/.exec(path);
  if (asset) return asset[1]!.startsWith('.') ? null : { kind: 'asset', name: asset[1]! };
  const segment = /^\/([a-z][a-z0-9-]*)(?:\/[^?#]*)?$/.exec(path)?.[1];
  return segment && sections.has(segment) && !RESERVED_SEGMENTS.has(segment) ? { kind: 'page' } : null;
}

export interface ConsoleBuild {
  page: ConsoleFile;
  assets: Map<string, ConsoleFile>;
  sections: Set<string>;
}

function file(body: Buffer, type: string): ConsoleFile {
  const gzipped = gzipSync(body);
  return { body, gzipped: gzipped.length < body.length ? gzipped : null, type };
}

/** The built console (scripts/build-web.mjs writes `dist/web`), read once; null when it has not been built. */
export function loadConsoleBuild(dir: string): ConsoleBuild | null {
  if (!existsSync(join(dir, 'index.html'))) return null;
  const assets = new Map<string, ConsoleFile>();
  const assetDir = join(dir, 'assets');
  for (const name of existsSync(assetDir) ? readdirSync(assetDir) : []) {
    const type = TYPES[extname(name)];
    if (type) assets.set(name, file(readFileSync(join(assetDir, name)), type));
  }
  const sections = new Set(JSON.parse(readFileSync(join(dir, 'sections.json'), 'utf8')) as string[]);
  return { page: file(readFileSync(join(dir, 'index.html')), 'text/html; charset=utf-8'), assets, sections };
}
