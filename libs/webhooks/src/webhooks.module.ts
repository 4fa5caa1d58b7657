import { Module } from '@nestjs/common';
import { ClockModule } from '@aileron/clock';
import { QuietOrganizations } from './quiet-organizations';
import { WebhookDeliveryService } from './webhook-delivery.service';
import { WebhooksController } from './webhooks.controller';
import { WebhooksRepository } from './webhooks.repository';
import { WebhooksService } from './webhooks.service';

/** Outgoing webhooks: endpoints (REST), the outbox consumer that fans events out, and the `webhooks.deliver` job. */
@Module({
  imports: [ClockModule],
  controllers: [WebhooksController],
  providers: [WebhooksRepository, WebhooksService, QuietOrganizations, WebhookDeliveryService],
  exports: [WebhooksService],
})
export class WebhooksModule {}
