import { Controller, Query } from '@nestjs/common';
import { z } from 'zod';
import { TenantScope, WorkspaceScope } from '@aileron/auth';
import { Route } from '@aileron/http';
import { overviewQuery, overviewView, wsParams } from './overview.schemas';
import { OverviewService } from './overview.service';

@Controller()
export class OverviewController {
  constructor(private readonly overviews: OverviewService) {}

  @Route({
    method: 'GET',
    path: '/v1/workspaces/:ws/overview',
    summary: 'The workspace at a glance: calls, denials and approvals over the last hour or day, pool and gateways',
    description:
      "Calls are counted per minute (`window=1h`) or per hour (`1d`) by the database, from the audit chain's call records in that range (one record per call: docs/audit.md says which). Approvals waiting, the pool's instances (on the replica that answers) and the gateways are as they are now.",
    tag: 'audit',
    // the figures are the audit log's, counted
    permission: 'audit.read',
    tenancy: 'workspace',
    params: wsParams,
    query: overviewQuery,
    response: overviewView,
    example: { query: { window: '1d' } },
  })
  async overview(
    @TenantScope() scope: WorkspaceScope,
    @Query() query: z.infer<typeof overviewQuery>,
  ): Promise<z.infer<typeof overviewView>> {
    const o = await this.overviews.overview(scope, query.window);
    const totals = { calls: 0, allowed: 0, denied: 0, approval: 0 };
    for (const b of o.buckets) {
      totals.calls += b.calls;
      totals.allowed += b.allowed;
      totals.denied += b.denied;
      totals.approval += b.approval;
    }
    return {
      window: o.window,
      from: o.from.toISOString(),
      to: o.to.toISOString(),
      bucket_seconds: o.bucketSeconds,
      buckets: o.buckets.map(({ start, ...counts }) => ({ start: new Date(start).toISOString(), ...counts })),
      totals,
      approvals_waiting: o.approvalsWaiting,
      pool: {
        instances: o.pool.map((i) => ({
          server: i.server,
          version: i.version,
          id: i.id,
          state: i.state,
          crashes: i.crashes,
          last_crash_at: i.lastCrashAt?.toISOString() ?? null,
          inflight: i.inflight,
          sessions: i.sessions,
        })),
      },
      gateways: {
        enrolled: o.gateways.enrolled,
        seen_in_window: o.gateways.seen,
        recent: o.gateways.recent.map((g) => ({
          id: g.id,
          name: g.name,
          last_seen_at: g.lastSeenAt?.toISOString() ?? null,
          enrolled_at: g.enrolledAt.toISOString(),
        })),
      },
    };
  }
}
