import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { Injectable } from '@nestjs/common';
import { projectRoot } from '@aileron/config';
import { DomainError, NotFoundError } from '@aileron/errors';
import { ConsoleBuild, ConsoleFile, consoleCsp, consoleTarget, loadConsoleBuild } from './console-files';
import { FastPaths } from './fast-paths';
import { writeProblem } from './problem.filter';
import { RequestLog } from './request-log';
import { requestIdFor } from './request-ids';

/** a hashed file name changes with its content: it may be kept for a year */
const IMMUTABLE = 'public, max-age=31536000, immutable';

/**
 * Serves the web console (apps/web, built into dist/web) in front of the
 * framework: the page at `/` and at the console's own sections, its hashed
 * assets under `/assets/`. Static files need no routing, guard or body
 * parsing; the request log and metrics are the routes' (RequestLog).
 */
@Injectable()
export class ConsoleFastPath {
  private build: ConsoleBuild | null | undefined;

  constructor(
    fastPaths: FastPaths,
    private readonly requests: RequestLog,
  ) {
    fastPaths.add((request, response) => this.answer(request, response));
  }

  /** Read on first use, so a process that never serves the console (tests of the API) never reads it. */
  private files(): ConsoleBuild | null {
    if (this.build === undefined) this.build = loadConsoleBuild(join(projectRoot(), 'dist', 'web'));
    return this.build;
  }

  private answer(request: IncomingMessage, response: ServerResponse): boolean {
    if (request.method !== 'GET' && request.method !== 'HEAD') return false;
    const url = request.url ?? '/';
    // the hot paths (gateway polls, MCP) step past at once
    if (url.startsWith('/v1/') || url.startsWith('/mcp/')) return false;
    // sections are known only once the build is read; `/` and assets are the console's either way
    const build = this.files();
    const target = consoleTarget(url, build?.sections ?? new Set());
    if (!target) return false;
    const requestId = requestIdFor(request.headers['x-request-id']);
    this.requests.follow(request, response, target.kind === 'page' ? 'console page' : 'console asset', requestId);
    if (!build) {
      writeProblem(
        response,
        new DomainError('CONSOLE_NOT_BUILT', 'The web console has not been built: run `npm run build`'),
        requestId,
      );
      return true;
    }
    if (target.kind === 'asset') {
      const asset = build.assets.get(target.name);
      if (!asset) writeProblem(response, new NotFoundError('asset', target.name, 'ASSET_NOT_FOUND'), requestId);
      else this.send(request, response, asset, { 'cache-control': IMMUTABLE });
      return true;
    }
    // a new nonce for each answer, for the <style> elements Mantine writes (never for scripts)
    const nonce = randomBytes(16).toString('base64');
    const page = {
      body: Buffer.from(build.page.body.toString('utf8').replace('__CSP_NONCE__', nonce)),
      gzipped: null,
      type: build.page.type,
    };
    this.send(request, response, page, {
      // the page names the current assets and carries a fresh nonce: never cached
      'cache-control': 'no-store',
      'content-security-policy': consoleCsp(nonce),
      'referrer-policy': 'same-origin',
      'x-frame-options': 'DENY',
    });
    return true;
  }

  private send(
    request: IncomingMessage,
    response: ServerResponse,
    file: ConsoleFile,
    headers: Record<string, string>,
  ): void {
    const gzip = file.gzipped !== null && /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''));
    const body = gzip ? file.gzipped! : file.body;
    response.writeHead(200, {
      ...headers,
      'content-type': file.type,
      'content-length': String(body.length),
      'x-content-type-options': 'nosniff',
      vary: 'accept-encoding',
      ...(gzip ? { 'content-encoding': 'gzip' } : {}),
    });
    response.end(request.method === 'HEAD' ? undefined : body);
  }
}
