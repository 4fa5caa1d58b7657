import { Body, Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, OrgScope, Principal, Role, TenantScope, WorkspaceScope } from '@aileron/auth';
import { createdAtKey, legacyPageView, ListCursor, PageQuery, pageQuery, Route, withLegacyKey } from '@aileron/http';
import {
  createUserBody,
  CreateUserBody,
  memberParams,
  memberView,
  putMemberBody,
  updateUserBody,
  userParams,
  userView,
  wsParams,
} from './tenancy.schemas';
import { TenancyService } from './tenancy.service';
import { toMemberView, toUserView } from './views';

const usersPage = legacyPageView(userView, 'users');
const usersCursor = new ListCursor('users', createdAtKey);
const membersPage = legacyPageView(memberView, 'members');
const membersCursor = new ListCursor('members', createdAtKey);

@Controller()
export class PeopleController {
  constructor(private readonly tenancy: TenancyService) {}

  @Route({
    method: 'GET',
    path: '/v1/users',
    summary: "The organisation's users, oldest first",
    tag: 'people',
    permission: 'user.read',
    tenancy: 'organization',
    query: pageQuery(),
    response: usersPage,
  })
  async users(@TenantScope() scope: OrgScope, @Query() query: PageQuery): Promise<z.infer<typeof usersPage>> {
    const rows = await this.tenancy.listUsers(scope, usersCursor.keyset(query));
    return withLegacyKey(
      usersCursor.page(rows, query, (u) => u, toUserView),
      'users',
    );
  }

  @Route({
    method: 'POST',
    path: '/v1/users',
    summary: 'Add a user before their first sign-in',
    description:
      'The first identity-provider sign-in with the same e-mail links to this user and keeps its role and memberships.',
    tag: 'people',
    permission: 'user.write',
    tenancy: 'organization',
    body: createUserBody,
    response: userView,
    status: 201,
    example: { body: { email: 'dev@example.com', role: 'member' } },
  })
  async createUser(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Body() body: CreateUserBody,
  ): Promise<z.infer<typeof userView>> {
    return toUserView(await this.tenancy.createUser(caller, scope, body));
  }

  @Route({
    method: 'PATCH',
    path: '/v1/users/:id',
    summary: "Change a user's organisation-wide role",
    tag: 'people',
    permission: 'user.write',
    tenancy: 'organization',
    params: userParams,
    body: updateUserBody,
    response: userView,
    example: { params: { id: '{user}' }, body: { role: 'auditor' } },
  })
  async updateUser(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Param('id') id: string,
    @Body() body: { role: Role },
  ): Promise<z.infer<typeof userView>> {
    return toUserView(await this.tenancy.updateUserRole(caller, scope, id, body.role));
  }

  @Route({
    method: 'POST',
    path: '/v1/users/:id/deactivate',
    summary: 'Offboard a person: everything that acts for them ends on every replica; their audit history stays',
    description:
      'In one transaction: the user is marked deactivated (no sign-in until reactivated), their memberships are removed, and the API tokens that act for them, their browser sessions, the gateways enrolled with their codes, their agent sessions, the pending approval requests asked in their name and their review links end, each with its own record. Not yourself (403 `SELF_OFFBOARDING_FORBIDDEN`), not the last active owner (409 `LAST_OWNER`). Deactivating someone deactivated already changes nothing.',
    tag: 'people',
    permission: 'user.write',
    tenancy: 'organization',
    params: userParams,
    response: userView,
    example: { params: { id: '{user}' } },
  })
  async deactivateUser(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Param('id') id: string,
  ): Promise<z.infer<typeof userView>> {
    return toUserView(await this.tenancy.offboard(caller, scope, id, 'deactivate'));
  }

  @Route({
    method: 'POST',
    path: '/v1/users/:id/reactivate',
    summary: 'Let a deactivated person sign in again; the memberships they had do not come back',
    tag: 'people',
    permission: 'user.write',
    tenancy: 'organization',
    params: userParams,
    response: userView,
    example: { params: { id: '{user}' } },
  })
  async reactivateUser(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Param('id') id: string,
  ): Promise<z.infer<typeof userView>> {
    return toUserView(await this.tenancy.reactivate(caller, scope, id));
  }

  @Route({
    method: 'DELETE',
    path: '/v1/users/:id',
    summary: 'Remove a person: offboarded as by deactivation, then the user is deleted; their audit history stays',
    description:
      'The audit records keep naming `user:<id>` and the chain still verifies; the `user.removed` record keeps their e-mail. If the identity provider still signs them in, they come back as a new user with no memberships: deactivate to keep someone out.',
    tag: 'people',
    permission: 'user.write',
    tenancy: 'organization',
    params: userParams,
    status: 204,
    example: { params: { id: '{user}' } },
  })
  async removeUser(
    @Caller() caller: Principal,
    @TenantScope() scope: OrgScope,
    @Param('id') id: string,
  ): Promise<void> {
    await this.tenancy.offboard(caller, scope, id, 'remove');
  }

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/members',
    summary: "The workspace's members, oldest membership first",
    tag: 'people',
    permission: 'member.read',
    tenancy: 'workspace',
    params: wsParams,
    query: pageQuery(),
    response: membersPage,
  })
  async members(@TenantScope() scope: WorkspaceScope, @Query() query: PageQuery): Promise<z.infer<typeof membersPage>> {
    const rows = await this.tenancy.listMembers(scope, membersCursor.keyset(query));
    return withLegacyKey(
      membersCursor.page(rows, query, (m) => ({ createdAt: m.createdAt, id: m.userId }), toMemberView),
      'members',
    );
  }

  @Route({
    method: 'PUT',
    path: '/v1/workspaces/:ws/members/:user_id',
    summary: 'Add a user to the workspace, or change their role in it',
    tag: 'people',
    permission: 'member.write',
    tenancy: 'workspace',
    params: memberParams,
    body: putMemberBody,
    response: memberView,
    example: { params: { user_id: '{user}' }, body: { role: 'approver' } },
  })
  async putMember(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param('user_id') userId: string,
    @Body() body: { role: Role },
  ): Promise<z.infer<typeof memberView>> {
    return toMemberView(await this.tenancy.putMember(caller, scope, userId, body.role));
  }

  @Route({
    method: 'DELETE',
    path: '/v1/workspaces/:ws/members/:user_id',
    summary: 'Remove a user from the workspace',
    tag: 'people',
    permission: 'member.write',
    tenancy: 'workspace',
    params: memberParams,
    status: 204,
    example: { params: { user_id: '{user}' } },
  })
  async removeMember(
    @Caller() caller: Principal,
    @TenantScope() scope: WorkspaceScope,
    @Param('user_id') userId: string,
  ): Promise<void> {
    await this.tenancy.removeMember(caller, scope, userId);
  }
}
