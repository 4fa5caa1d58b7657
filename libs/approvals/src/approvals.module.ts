import { Module } from '@nestjs/common';
import { PolicyModule } from '@aileron/policy';
import { WebhooksModule } from '@aileron/webhooks';
import { ApprovalsController } from './approvals.controller';
import { ApprovalsRepository } from './approvals.repository';
import { ApprovalsService } from './approvals.service';
import { ReviewController } from './review.controller';

@Module({
  imports: [PolicyModule, WebhooksModule],
  controllers: [ApprovalsController, ReviewController],
  providers: [ApprovalsRepository, ApprovalsService],
  exports: [ApprovalsService],
})
export class ApprovalsModule {}
