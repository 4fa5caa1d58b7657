import { ApprovalsModule } from '@aileron/approvals';
import { AuditModule } from '@aileron/audit';
import { AuthModule } from '@aileron/auth';
import { CatalogModule } from '@aileron/catalog';
import { EventsModule } from '@aileron/events';
import { GatewayModule } from '@aileron/gateway';
import { PolicyModule } from '@aileron/policy';
import { PoolModule } from '@aileron/pool';
import { TenancyModule } from '@aileron/tenancy';
import { VaultModule } from '@aileron/vault';
import { WebhooksModule } from '@aileron/webhooks';

/**
 * Every domain module, in one list for every entry point (control plane,
 * worker, CLI bootstrap): domains register their job processors and outbox
 * consumers when their module loads, so a process missing one would silently
 * leave its jobs unprocessed.
 */
export const DOMAIN_MODULES = [AuthModule, TenancyModule, AuditModule, WebhooksModule, PolicyModule, CatalogModule, VaultModule, ApprovalsModule, EventsModule, GatewayModule, PoolModule];
