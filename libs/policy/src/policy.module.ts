import { Module } from '@nestjs/common';
import { ClockModule } from '@aileron/clock';
import { TenancyModule } from '@aileron/tenancy';
import { PolicyController } from './policy.controller';
import { PolicyRepository } from './policy.repository';
import { PolicyService } from './policy.service';

@Module({
  imports: [ClockModule, TenancyModule],
  controllers: [PolicyController],
  providers: [PolicyRepository, PolicyService],
  exports: [PolicyService],
})
export class PolicyModule {}
