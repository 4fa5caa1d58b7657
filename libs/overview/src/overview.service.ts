import { Injectable } from '@nestjs/common';
import { ApprovalsService } from '@aileron/approvals';
import { AuditService } from '@aileron/audit';
import type { WorkspaceScope } from '@aileron/auth';
import { Clock } from '@aileron/clock';
import { GatewaysService } from '@aileron/gateway';
import { InstanceHealth, PoolInstances } from '@aileron/pool';
import { Bucket, fillBuckets, OverviewWindow, windowRange } from './domain/overview-window';

const RECENT_GATEWAYS = 10;

export interface Overview {
  window: OverviewWindow;
  from: Date;
  to: Date;
  bucketSeconds: number;
  buckets: Bucket[];
  approvalsWaiting: number;
  pool: InstanceHealth[];
  gateways: Awaited<ReturnType<GatewaysService['activity']>>;
}

/**
 * A workspace at a glance, each figure from the domain that owns it and read
 * in parallel: calls per bucket counted in the database over the window's
 * range of the audit chain (never the log read here), approvals waiting, the
 * pool's instances on this replica, the gateways and when they were last seen.
 */
@Injectable()
export class OverviewService {
  constructor(
    private readonly audit: AuditService,
    private readonly approvals: ApprovalsService,
    private readonly gateways: GatewaysService,
    private readonly instances: PoolInstances,
    private readonly clock: Clock,
  ) {}

  async overview(scope: WorkspaceScope, window: OverviewWindow): Promise<Overview> {
    const range = windowRange(window, this.clock.now());
    const [counts, approvalsWaiting, gateways] = await Promise.all([
      this.audit.callCounts(scope, range),
      this.approvals.waitingCount(scope),
      this.gateways.activity(scope, range.from, RECENT_GATEWAYS),
    ]);
    return {
      window,
      ...range,
      buckets: fillBuckets(range, counts),
      approvalsWaiting,
      pool: this.instances.health(scope),
      gateways,
    };
  }
}
