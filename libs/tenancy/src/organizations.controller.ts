import { Body, Controller } from '@nestjs/common';
import { z } from 'zod';
import { Caller, describePrincipal, OrgScope, Principal, TenantScope } from '@aileron/auth';
import { NotFoundError } from '@aileron/errors';
import { Route } from '@aileron/http';
import {
  createdOrganization,
  createOrganizationBody,
  CreateOrganizationBody,
  identityProviderBody,
  IdentityProviderBody,
  identityProviderView,
  organizationView,
} from './tenancy.schemas';
import { TenancyService } from './tenancy.service';
import { toIdentityProviderView, toOrganizationView } from './views';

@Controller()
export class OrganizationsController {
  constructor(private readonly tenancy: TenancyService) {}

  @Route({
    method: 'POST',
    path: '/v1/organizations',
    summary: 'Create an organisation (platform operators only)',
    description: 'Answers with the organisation and its first owner token, shown once.',
    tag: 'organizations',
    tenancy: 'platform',
    body: createOrganizationBody,
    response: createdOrganization,
    status: 201,
    example: { body: { slug: 'acme', name: 'Acme Inc.' } },
  })
  async create(
    @Caller() caller: Principal,
    @Body() body: CreateOrganizationBody,
  ): Promise<z.infer<typeof createdOrganization>> {
    const created = await this.tenancy.createOrganization(body, describePrincipal(caller));
    return {
      organization: toOrganizationView(created.organization),
      owner_token: { id: created.tokenId, token: created.token },
    };
  }

  @Route({
    method: 'GET',
    path: '/v1/organization',
    summary: "The caller's organisation",
    tag: 'organizations',
    permission: 'organization.read',
    tenancy: 'organization',
    response: organizationView,
  })
  async current(@TenantScope() scope: OrgScope): Promise<z.infer<typeof organizationView>> {
    return toOrganizationView(await this.tenancy.getOrganization(scope));
  }

  @Route({
    method: 'GET',
    path: '/v1/organization/identity-provider',
    summary: "The organisation's OIDC identity provider",
    tag: 'organizations',
    permission: 'organization.manage',
    tenancy: 'organization',
    response: identityProviderView,
  })
  async identityProvider(@TenantScope() scope: OrgScope): Promise<z.infer<typeof identityProviderView>> {
    const provider = await this.tenancy.getIdentityProvider(scope);
    if (!provider) throw new NotFoundError('identity provider', 'current', 'IDENTITY_PROVIDER_NOT_FOUND');
    return toIdentityProviderView(provider);
  }

  @Route({
    method: 'PUT',
    path: '/v1/organization/identity-provider',
    summary: 'Set the OIDC identity provider whose JWTs sign people in',
    description:
      'JWTs whose `iss` is `issuer` are verified against `jwks_url`; `claims` say where the subject, e-mail, name and role are; `role_mapping` maps role-claim values to roles.',
    tag: 'organizations',
    permission: 'organization.manage',
    tenancy: 'organization',
    body: identityProviderBody,
    response: identityProviderView,
    example: {
      body: {
        issuer: 'https://login.example.com/',
        jwks_url: 'https://login.example.com/.well-known/jwks.json',
        claims: { role: 'groups' },
        role_mapping: { 'sec-team': 'admin' },
      },
    },
  })
  async putIdentityProvider(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Body() body: IdentityProviderBody,
  ): Promise<z.infer<typeof identityProviderView>> {
    return toIdentityProviderView(await this.tenancy.putIdentityProvider(caller, scope, body));
  }

  @Route({
    method: 'DELETE',
    path: '/v1/organization/identity-provider',
    summary: 'Remove the identity provider; its JWTs stop working',
    tag: 'organizations',
    permission: 'organization.manage',
    tenancy: 'organization',
    status: 204,
  })
  async deleteIdentityProvider(@Caller() caller: Principal, @TenantScope() scope: OrgScope): Promise<void> {
    await this.tenancy.deleteIdentityProvider(caller, scope);
  }
}
