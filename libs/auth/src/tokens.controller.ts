import { Body, Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { createdAtKey, legacyPageView, ListCursor, PageQuery, pageQuery, Route, withLegacyKey } from '@aileron/http';
import type { Principal } from './domain/principal';
import { Caller, TenantScope } from './auth.decorators';
import type { OrgScope } from './scope';
import { createdToken, createTokenBody, CreateTokenBody, tokenIdParams, tokenView } from './tokens.schemas';
import { TokensService, tokenView as view } from './tokens.service';

const tokensPage = legacyPageView(tokenView, 'tokens');
const tokensCursor = new ListCursor('tokens', createdAtKey);

@Controller()
export class TokensController {
  constructor(private readonly tokens: TokensService) {}

  @Route({
    method: 'POST',
    path: '/v1/tokens',
    summary: 'Create an API token',
    description:
      'Returns the token once. Without `workspace` it acts in every workspace of the organisation; nobody can create a token with a role above their own.',
    tag: 'tokens',
    // the permission depends on the body's workspace, so TokensService checks it
    tenancy: 'caller',
    body: createTokenBody,
    response: createdToken,
    status: 201,
    example: { body: { name: 'ci', role: 'member', workspace: '{ws}' } },
  })
  async create(@Caller() caller: Principal, @Body() body: CreateTokenBody): Promise<z.infer<typeof createdToken>> {
    const { record, token } = await this.tokens.create(caller, body);
    return { ...view(record), token };
  }

  @Route({
    method: 'GET',
    path: '/v1/tokens',
    summary: 'List API tokens (metadata only), oldest first',
    tag: 'tokens',
    permission: 'token.read',
    tenancy: 'organization',
    query: pageQuery(),
    response: tokensPage,
  })
  async list(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Query() query: PageQuery,
  ): Promise<z.infer<typeof tokensPage>> {
    const rows = await this.tokens.list(caller, scope, tokensCursor.keyset(query));
    return withLegacyKey(
      tokensCursor.page(rows, query, (t) => t, view),
      'tokens',
    );
  }

  @Route({
    method: 'DELETE',
    path: '/v1/tokens/:id',
    summary: 'Revoke an API token; it stops working at once',
    tag: 'tokens',
    permission: 'token.revoke',
    tenancy: 'organization',
    params: tokenIdParams,
    status: 204,
    example: { params: { id: '{token}' } },
  })
  async revoke(@Caller() caller: Principal, @TenantScope() scope: OrgScope, @Param('id') id: string): Promise<void> {
    await this.tokens.revoke(caller, scope, id);
  }
}
