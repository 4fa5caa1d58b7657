import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { AuthenticatedRequest } from './auth.guard';
import type { Principal } from './domain/principal';

/** The authenticated caller. */
export const Caller = createParamDecorator((_: unknown, context: ExecutionContext): Principal => {
  const principal = context.switchToHttp().getRequest<AuthenticatedRequest>().principal;
  if (!principal) throw new Error('@Caller() used on a public route');
  return principal;
});

/** The tenant scope the guard resolved from the route's permission and `:ws`. */
export const TenantScope = createParamDecorator((_: unknown, context: ExecutionContext) => {
  const scope = context.switchToHttp().getRequest<AuthenticatedRequest>().scope;
  if (!scope) throw new Error('@TenantScope() used on a route without a permission');
  return scope;
});
