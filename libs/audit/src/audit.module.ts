import { Module } from '@nestjs/common';
import { ClockModule } from '@aileron/clock';
import { AuditController } from './audit.controller';
import { AuditRepository } from './audit.repository';
import { AuditService } from './audit.service';
import { AuditSinksController } from './audit-sinks.controller';
import { AuditSinksRepository } from './audit-sinks.repository';
import { AuditSinksService } from './audit-sinks.service';

@Module({
  imports: [ClockModule],
  controllers: [AuditController, AuditSinksController],
  providers: [AuditRepository, AuditService, AuditSinksRepository, AuditSinksService],
  exports: [AuditService],
})
export class AuditModule {}
