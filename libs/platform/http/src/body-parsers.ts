import type { IncomingHttpHeaders } from 'node:http';
import { parse as parseQuery } from 'node:querystring';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import parseJson from 'secure-json-parse';
import { DomainError } from '@aileron/errors';

/** The largest request body the control plane reads, on the routes and the fast paths alike. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

/**
 * A body that could not be read. The rest of it may still be on the way, so
 * the answer closes the connection instead of reading it to find the next
 * request.
 */
export class BodyError extends DomainError {
  readonly closesConnection = true;
}

/**
 * Every request body the control plane reads goes through here: the routes
 * (Fastify's parser for JSON and YAML is this) and the fast paths in front of
 * them, so a body is accepted, and refused, the same way wherever it arrives.
 */
export function readBodyText(body: Readable, headers: IncomingHttpHeaders): Promise<string> {
  return new Promise((resolve, reject) => {
    const length = headers['content-length'];
    const declared = length === undefined ? undefined : Number(length);
    // Node's parser delivers exactly the declared length; a declared length over the limit is refused unread
    if ((declared ?? 0) > BODY_LIMIT_BYTES) {
      reject(tooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let whole = false;
    const done = (): void => {
      if (whole) return;
      whole = true;
      resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8'));
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > BODY_LIMIT_BYTES) {
        body.off('data', onData);
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
      // all the declared bytes are the whole body (the parser passes no more): no turn spent waiting for 'end'
      if (size === declared) done();
    };
    body.on('data', onData);
    // the client went away while sending: nothing to answer, nothing wrong here
    body.once('error', () =>
      reject(new BodyError('REQUEST_ABORTED', 'The client closed the connection before the request body arrived')),
    );
    body.once('end', done);
  });
}

/** JSON as every route takes it: not empty, no `__proto__` or `constructor.prototype` keys. */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === '') throw new BodyError('MALFORMED_JSON', 'The request body is empty; send a JSON document');
  try {
    return parseJson(text, null, { protoAction: 'error', constructorAction: 'error' });
  } catch (error) {
    // secure-json-parse's own refusal names the key; anything else is a syntax error
    if (error instanceof SyntaxError && /forbidden/.test(error.message))
      throw new BodyError('BAD_REQUEST', error.message);
    throw new BodyError('MALFORMED_JSON', 'The request body is not valid JSON');
  }
}

/** A JSON body, read and parsed by the rules above. */
export function readJsonBody(body: Readable, headers: IncomingHttpHeaders): Promise<unknown> {
  return readBodyText(body, headers).then(parseJsonBody);
}

/**
 * The routes' body parsers, in place of Fastify's and Nest's (the app is made
 * with `bodyParser: false`). YAML arrives as text and is parsed by the
 * validation interceptor, only for routes that accept it (415 elsewhere). Form
 * bodies are parsed as Nest's default parser did, so a route that took one
 * still does.
 */
export function installBodyParsers(fastify: FastifyInstance): void {
  fastify.removeContentTypeParser('application/json');
  fastify.addContentTypeParser(
    'application/x-www-form-urlencoded',
    async (request: FastifyRequest, payload: Readable) => parseQuery(await readBodyText(payload, request.headers)),
  );
  fastify.addContentTypeParser('application/json', (request: FastifyRequest, payload: Readable) =>
    readJsonBody(payload, request.headers),
  );
  fastify.addContentTypeParser(
    ['application/yaml', 'application/x-yaml', 'text/yaml'],
    (request: FastifyRequest, payload: Readable) => readBodyText(payload, request.headers),
  );
  // uploads are not read here: the route streams them where they go, under its own size limit
  fastify.addContentTypeParser(
    [...STREAMED_BODY_TYPES],
    (_request: FastifyRequest, payload: Readable, done: (error: Error | null, body?: unknown) => void) =>
      done(null, payload),
  );
}

/** Media types a route receives as a stream (its body is the request's Readable). */
export const STREAMED_BODY_TYPES = ['application/x-git-bundle', 'application/gzip'] as const;

function tooLarge(): BodyError {
  return new BodyError('PAYLOAD_TOO_LARGE', `The request body exceeds ${BODY_LIMIT_BYTES} bytes`);
}
