import { Body, Controller, Param } from '@nestjs/common';
import { z } from 'zod';
import { Caller, OrgScope, Principal, Role, TenantScope, WorkspaceScope } from '@aileron/auth';
import { Route } from '@aileron/http';
import { createUserBody, CreateUserBody, memberParams, memberView, putMemberBody, updateUserBody, userParams, userView, wsParams } from './tenancy.schemas';
import { TenancyService } from './tenancy.service';
import { toMemberView, toUserView } from './views';

@Controller()
export class PeopleController {
  constructor(private readonly tenancy: TenancyService) {}

  @Route({
    method: 'GET',
    path: '/v1/users',
    summary: "The organisation's users",
    tag: 'people',
    permission: 'user.read',
    tenancy: 'organization',
    response: z.object({ users: z.array(userView) }),
  })
  async users(@TenantScope() scope: OrgScope): Promise<{ users: z.infer<typeof userView>[] }> {
    return { users: (await this.tenancy.listUsers(scope)).map(toUserView) };
  }

  @Route({
    method: 'POST',
    path: '/v1/users',
    summary: 'Add a user before their first sign-in',
    description: 'The first identity-provider sign-in with the same e-mail links to this user and keeps its role and memberships.',
    tag: 'people',
    permission: 'user.write',
    tenancy: 'organization',
    body: createUserBody,
    response: userView,
    status: 201,
    example: { body: { email: 'dev@example.com', role: 'member' } },
  })
  async createUser(@Caller() caller: Principal, @TenantScope() scope: OrgScope, @Body() body: CreateUserBody): Promise<z.infer<typeof userView>> {
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
    method: 'GET',
    path: '/v1/workspaces/:ws/members',
    summary: "The workspace's members",
    tag: 'people',
    permission: 'member.read',
    tenancy: 'workspace',
    params: wsParams,
    response: z.object({ members: z.array(memberView) }),
  })
  async members(@TenantScope() scope: WorkspaceScope): Promise<{ members: z.infer<typeof memberView>[] }> {
    return { members: (await this.tenancy.listMembers(scope)).map(toMemberView) };
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
  async removeMember(@Caller() caller: Principal, @TenantScope() scope: WorkspaceScope, @Param('user_id') userId: string): Promise<void> {
    await this.tenancy.removeMember(caller, scope, userId);
  }
}
