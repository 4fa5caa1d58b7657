import { ApprovalsModule } from '@aileron/approvals';
import { AuditModule } from '@aileron/audit';
import { AuthModule } from '@aileron/auth';
import { CatalogModule } from '@aileron/catalog';
import { ConnectionsModule } from '@aileron/connections';
import { EventsModule } from '@aileron/events';
import { GatewayModule } from '@aileron/gateway';
import { OauthModule } from '@aileron/oauth';
import { OverviewModule } from '@aileron/overview';
import { PolicyModule } from '@aileron/policy';
import { PoolModule } from '@aileron/pool';
import { SandboxesModule } from '@aileron/sandboxes';
import { AgentSessionsModule } from '@aileron/sessions';
import { TenancyModule } from '@aileron/tenancy';
import { VaultModule } from '@aileron/vault';
import { WebhooksModule } from '@aileron/webhooks';

/**
 * The domains a process that runs jobs needs, in one list for every such
 * entry point (control plane, worker, CLI bootstrap): domains register their
 * job processors and outbox consumers when their module loads, so a process
 * missing one would silently leave its jobs unprocessed. Approvals is here
 * because webhooks complete its one-time links as they send them.
 */
export const JOB_MODULES = [
  AuthModule,
  TenancyModule,
  AuditModule,
  WebhooksModule,
  PolicyModule,
  CatalogModule,
  VaultModule,
  ApprovalsModule,
  EventsModule,
  GatewayModule,
];

/**
 * Every domain, for the control plane. The pool serves MCP and nothing else:
 * it registers no job, and its journal, instance driver and Redis MCP session
 * directory must not start in a process that serves no MCP (a worker sharing
 * the data directory would replay the control plane's journal). The overview
 * reads the pool's instances, so it comes with the pool.
 */
export const DOMAIN_MODULES = [
  ...JOB_MODULES,
  OauthModule,
  ConnectionsModule,
  PoolModule,
  AgentSessionsModule,
  SandboxesModule,
  OverviewModule,
];
