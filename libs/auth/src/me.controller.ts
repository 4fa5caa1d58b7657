import { Controller } from '@nestjs/common';
import { z } from 'zod';
import { ForbiddenError } from '@aileron/errors';
import { Route } from '@aileron/http';
import { describePrincipal, Principal, roleIn } from './domain/principal';
import { role } from './tokens.schemas';
import { Caller } from './auth.decorators';
import { AccessService } from './access.service';
import { AuthRepository } from './auth.repository';
import { JwtKeys } from './jwt-keys.service';
import { TokensService } from './tokens.service';

const meView = z.object({
  principal: z.object({ kind: z.enum(['api_token', 'user', 'gateway', 'session']), id: z.string(), name: z.string() }),
  organization: z.object({ id: z.string(), slug: z.string(), name: z.string() }),
  role: role.nullable().describe('organisation-wide role; null for a token limited to one workspace'),
  platform_operator: z.boolean(),
  workspaces: z.array(z.object({ slug: z.string(), name: z.string(), role })),
  idp_groups: z
    .array(z.string())
    .describe(
      "a person's identity-provider groups that count for approval routes: the credential's own (an IdP JWT), else those of their last sign-in",
    ),
});

const issuedJwt = z.object({ token: z.string(), token_type: z.literal('Bearer'), expires_at: z.string() });

@Controller()
export class MeController {
  constructor(
    private readonly repository: AuthRepository,
    private readonly access: AccessService,
    private readonly keys: JwtKeys,
    private readonly tokens: TokensService,
  ) {}

  @Route({
    method: 'GET',
    path: '/v1/me',
    summary: 'The caller: principal, organisation, role, workspaces',
    tag: 'auth',
    tenancy: 'caller',
    gateways: true,
    response: meView,
  })
  async me(@Caller() caller: Principal): Promise<z.infer<typeof meView>> {
    const scope = this.access.callerOrganization(caller);
    const [organization, workspaces, user] = await Promise.all([
      this.repository.findOrganization(scope),
      this.repository.listWorkspaces(scope),
      caller.kind === 'user' ? this.repository.findUser(scope, caller.id) : null,
    ]);
    return {
      principal: { kind: caller.kind, id: caller.id, name: caller.name },
      organization: organization!,
      role: caller.orgRole,
      platform_operator: caller.platformOperator,
      workspaces: workspaces.flatMap((ws) => {
        const r = roleIn(caller, ws.id);
        return r ? [{ slug: ws.slug, name: ws.name, role: r }] : [];
      }),
      idp_groups: [...(caller.idpGroups ?? user?.idpGroups ?? [])],
    };
  }

  @Route({
    method: 'POST',
    path: '/v1/auth/token',
    summary: 'Exchange the current credential for a short-lived admin JWT',
    description:
      'The JWT carries the same rights as the credential and stops working when the API token it came from is revoked.',
    tag: 'auth',
    tenancy: 'caller',
    response: issuedJwt,
    status: 201,
  })
  async token(@Caller() caller: Principal): Promise<z.infer<typeof issuedJwt>> {
    // a gateway's rights come from its enrolment, which a JWT could outlive
    if (caller.kind === 'gateway')
      throw new ForbiddenError('Gateway tokens cannot be exchanged for admin JWTs', 'GATEWAY_TOKEN_NOT_ALLOWED');
    const { token, expiresAt } = await this.keys.issue({ sub: describePrincipal(caller), org: caller.organizationId });
    await this.tokens.recordLogin(caller, 'jwt_issued', { expires_at: expiresAt.toISOString() });
    return { token, token_type: 'Bearer', expires_at: expiresAt.toISOString() };
  }
}
