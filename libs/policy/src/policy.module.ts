import { Module } from '@nestjs/common';
import { AuditModule } from '@aileron/audit';
import { CatalogModule } from '@aileron/catalog';
import { ClockModule } from '@aileron/clock';
import { TenancyModule } from '@aileron/tenancy';
import { PolicyController } from './policy.controller';
import { PolicyReplay } from './policy-replay.service';
import { PolicyRepository } from './policy.repository';
import { PolicyService } from './policy.service';

@Module({
  imports: [ClockModule, TenancyModule, AuditModule, CatalogModule],
  controllers: [PolicyController],
  providers: [PolicyRepository, PolicyService, PolicyReplay],
  exports: [PolicyService],
})
export class PolicyModule {}
