import { Global, Module } from '@nestjs/common';
import { ClockModule } from '@aileron/clock';
import { OutboxRepository } from './outbox.repository';
import { OutboxService } from './outbox.service';

@Global()
@Module({ imports: [ClockModule], providers: [OutboxRepository, OutboxService], exports: [OutboxService] })
export class OutboxModule {}
