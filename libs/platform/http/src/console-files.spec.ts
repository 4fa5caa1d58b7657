import { describe, expect, it } from 'vitest';
import { CONSOLE_CSP, consoleCsp, consoleTarget } from './console-files';

const SECTIONS = new Set(['workspaces', 'catalog', 'sign-in', 'v1', 'mcp']);

describe('the console in front of the routes', () => {
  it('answers the page for / and for paths under its own sections, reloads and shared links included', () => {
    for (const path of [
      '/',
      '/workspaces',
      '/workspaces/payments/policy',
      '/catalog/github?tab=versions',
      '/sign-in/link',
    ]) {
      expect(consoleTarget(path, SECTIONS), path).toEqual({ kind: 'page' });
    }
  });

  it('never answers for the API, MCP or the server pages, even when a section is named like them', () => {
    for (const path of [
      '/v1/nope',
      '/v1',
      '/mcp/ws/server',
      '/mcp',
      '/docs',
      '/review/x',
      '/healthz',
      '/metrics',
      '/.well-known/x',
      '/unknown',
      '/Workspaces',
      '//workspaces',
    ]) {
      expect(consoleTarget(path, SECTIONS), path).toBeNull();
    }
  });

  it('serves hashed assets by plain file name only', () => {
    expect(consoleTarget('/assets/index-Bgs69Sek.js', SECTIONS)).toEqual({ kind: 'asset', name: 'index-Bgs69Sek.js' });
    for (const path of ['/assets/../index.html', '/assets/.vite', '/assets/a/b.js', '/assets/%2e%2e%2fsecret'])
      expect(consoleTarget(path, SECTIONS), path).toBeNull();
  });

  it('allows no inline script, no eval and no inline style, and is never framed', () => {
    const directives = new Map(
      CONSOLE_CSP.split(';')
        .map((d) => d.trim().split(/\s+/))
        .map(([name, ...values]) => [name!, values]),
    );
    expect(directives.get('script-src')).toEqual(["'self'"]);
    expect(directives.get('style-src')).toEqual(["'self'"]);
    expect(directives.get('default-src')).toEqual(["'none'"]);
    expect(directives.get('frame-ancestors')).toEqual(["'none'"]);
    expect(CONSOLE_CSP).not.toMatch(/unsafe-(inline|eval)|nonce-|\*/);
    // the per-answer nonce is for Mantine's <style> elements only, never for scripts
    const withNonce = consoleCsp('bm9uY2U=');
    expect(withNonce).toContain("style-src 'self' 'nonce-bm9uY2U='");
    expect(withNonce).toContain("script-src 'self';");
    expect(withNonce).not.toMatch(/unsafe-(inline|eval)/);
  });
});
