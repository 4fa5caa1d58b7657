import type { FastifyInstance } from 'fastify';

/**
 * Fastify parses JSON itself; YAML arrives as text and is parsed by the
 * validation interceptor, only for routes that accept it (415 elsewhere).
 */
export function installBodyParsers(fastify: FastifyInstance): void {
  fastify.addContentTypeParser(['application/yaml', 'application/x-yaml', 'text/yaml'], { parseAs: 'string' }, (_request, body, done) => done(null, body));
}

/** The largest request body the control plane reads: Fastify's bodyLimit, and the fast paths that read bodies themselves. */
export const BODY_LIMIT_BYTES = 1024 * 1024;
