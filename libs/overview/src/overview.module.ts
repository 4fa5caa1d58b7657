import { Module } from '@nestjs/common';
import { ApprovalsModule } from '@aileron/approvals';
import { AuditModule } from '@aileron/audit';
import { ClockModule } from '@aileron/clock';
import { GatewayModule } from '@aileron/gateway';
import { PoolModule } from '@aileron/pool';
import { OverviewController } from './overview.controller';
import { OverviewService } from './overview.service';

@Module({
  imports: [ClockModule, AuditModule, ApprovalsModule, GatewayModule, PoolModule],
  controllers: [OverviewController],
  providers: [OverviewService],
})
export class OverviewModule {}
