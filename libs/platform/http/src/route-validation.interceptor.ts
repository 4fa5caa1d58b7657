import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyRequest } from 'fastify';
import type { Observable } from 'rxjs';
import type { z } from 'zod';
import { DomainError, FieldIssue, ValidationError } from '@aileron/errors';
import { ROUTE_METADATA, RouteDefinition } from './route.decorator';

function issuesOf(where: string, error: z.ZodError): FieldIssue[] {
  return error.issues.map((issue) => ({
    path: [where, ...issue.path.map(String)].join('.'),
    message: issue.message,
  }));
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
      if (route.body && type !== undefined && !/^application\/(.+\+)?json\b/i.test(type)) {
        throw new DomainError('UNSUPPORTED_MEDIA_TYPE', 415, 'Unsupported media type', 'Send the body as application/json');
      }
      const issues: FieldIssue[] = [];
      const parse = (where: string, schema: z.ZodType | undefined, value: unknown): unknown => {
        if (!schema) return value;
        const result = schema.safeParse(value);
        if (result.success) return result.data;
        issues.push(...issuesOf(where, result.error));
        return value;
      };
      const params = parse('params', route.params, request.params ?? {});
      const query = parse('query', route.query, request.query ?? {});
      const body =
        route.body && (request.body === undefined || request.body === null)
          ? (issues.push({ path: 'body', message: 'a JSON body is required' }), undefined)
          : parse('body', route.body, request.body);
      if (issues.length > 0) throw new ValidationError(issues);
      (request as { params: unknown }).params = params;
      (request as { query: unknown }).query = query;
      if (route.body) (request as { body: unknown }).body = body;
    }
    return next.handle();
  }
}
