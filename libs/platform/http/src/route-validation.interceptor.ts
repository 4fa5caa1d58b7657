import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import type { Observable } from 'rxjs';
import { parse as parseYaml, YAMLError } from 'yaml';
import type { z } from 'zod';
import { DomainError, FieldIssue, fieldIssues, ValidationError } from '@aileron/errors';
import { ROUTE_METADATA, RouteDefinition } from './route.decorator';

const YAML_TYPE = /^(application|text)\/(x-)?yaml\b/i;
const FORM_TYPE = /^application\/x-www-form-urlencoded\b/i;

function parseYamlBody(text: string): unknown {
  try {
    // uniqueKeys: a key given twice is a mistake in a policy, not a silent override
    return parseYaml(text, { uniqueKeys: true, prettyErrors: true, maxAliasCount: 100 });
  } catch (error) {
    const where =
      error instanceof YAMLError && error.linePos
        ? `line ${error.linePos[0].line}, column ${error.linePos[0].col}: `
        : '';
    const message = error instanceof YAMLError ? error.message.split('\n')[0] : 'the YAML cannot be parsed';
    throw new DomainError('MALFORMED_YAML', `${where}${message}`);
  }
}

/**
 * Parses params, query and body with the route's zod schemas and replaces them
 * with the parsed values, so handlers only ever see validated input. Runs after
 * the auth guard: an unauthenticated caller learns nothing about the shape.
 */
@Injectable()
export class RouteValidationInterceptor implements NestInterceptor {
  constructor(private readonly reflector: Reflector) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const route = this.reflector.get<RouteDefinition | undefined>(ROUTE_METADATA, context.getHandler());
    if (route && context.getType() === 'http') {
      const request = context.switchToHttp().getRequest<FastifyRequest>();
      const type = request.headers['content-type'];
      const yaml = route.accepts?.includes('yaml') === true && type !== undefined && YAML_TYPE.test(type);
      const form = route.accepts?.includes('form') === true && type !== undefined && FORM_TYPE.test(type);
      if (route.body && type !== undefined && !yaml && !form && !/^application\/(.+\+)?json\b/i.test(type)) {
        const formats = [
          'application/json',
          ...(route.accepts?.includes('yaml') ? ['application/yaml'] : []),
          ...(route.accepts?.includes('form') ? ['application/x-www-form-urlencoded'] : []),
        ].join(' or ');
        throw new DomainError('UNSUPPORTED_MEDIA_TYPE', `Send the body as ${formats}`);
      }
      if (yaml && typeof request.body === 'string') (request as { body: unknown }).body = parseYamlBody(request.body);
      const issues: FieldIssue[] = [];
      const parse = (where: 'params' | 'query' | 'body', schema: z.ZodType | undefined, value: unknown): unknown => {
        if (!schema) return value;
        const result = schema.safeParse(value);
        if (result.success) return result.data;
        issues.push(...fieldIssues(where, result.error.issues));
        return value;
      };
      const params = parse('params', route.params, request.params ?? {});
      const query = parse('query', route.query, request.query ?? {});
      const body =
        route.body && (request.body === undefined || request.body === null)
          ? (issues.push({ path: 'body', message: 'a JSON body is required' }), undefined)
          : route.bodyValidation === 'handler'
            ? typeof request.body === 'object' && !Array.isArray(request.body)
              ? request.body
              : (issues.push({ path: 'body', message: 'must be an object' }), undefined)
            : parse('body', route.body, request.body);
      if (issues.length > 0) throw new ValidationError(issues);
      (request as { params: unknown }).params = params;
      (request as { query: unknown }).query = query;
      if (route.body) (request as { body: unknown }).body = body;
    }
    return next.handle();
  }
}
