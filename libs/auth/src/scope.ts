import type { Role } from './domain/roles';

declare const orgBrand: unique symbol;
declare const workspaceBrand: unique symbol;
declare const systemBrand: unique symbol;

/**
 * Tenant scopes. Every repository method takes one as its first argument, and
 * only the auth layer (AccessService after checking the caller, or
 * SystemScopes for the process's own work) can make one: the brands have no
 * runtime value, so a scope cannot be written as an object literal. A
 * workspace scope is also an organisation scope (of its own organisation).
 */
export interface OrgScope {
  readonly organizationId: string;
  readonly [orgBrand]: true;
}

export interface WorkspaceScope extends OrgScope {
  readonly workspaceId: string;
  readonly workspaceSlug: string;
  /** the caller's role in this workspace (system work acts as owner) */
  readonly role: Role;
  readonly [workspaceBrand]: true;
}

/**
 * No tenant: the process's own work across tenants, or before the tenant is
 * known (a lookup by token hash, a sweep over every organisation). A
 * repository method that is not tenant-scoped takes one, so reaching across
 * tenants is never an accident: only SystemScopes makes it, and only the
 * files .dependency-cruiser.cjs lists may use SystemScopes.
 */
export interface SystemScope {
  /** what the process is doing, for readers and logs */
  readonly context: string;
  readonly [systemBrand]: true;
}
