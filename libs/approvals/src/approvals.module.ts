import { Module } from '@nestjs/common';
import { ClockModule } from '@aileron/clock';
import { PolicyModule } from '@aileron/policy';
import { WebhooksModule } from '@aileron/webhooks';
import { ApprovalsController } from './approvals.controller';
import { ApprovalsRepository } from './approvals.repository';
import { ApprovalsService } from './approvals.service';
import { ReviewController } from './review.controller';

@Module({
  imports: [ClockModule, PolicyModule, WebhooksModule],
  controllers: [ApprovalsController, ReviewController],
  providers: [ApprovalsRepository, ApprovalsService],
  exports: [ApprovalsService],
})
export class ApprovalsModule {}
