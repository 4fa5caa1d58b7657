import { Module } from '@nestjs/common';
import { AuditModule } from '@aileron/audit';
import { ClockModule } from '@aileron/clock';
import { SecretChanges } from './secret-changes';
import { VaultController } from './vault.controller';
import { VaultRepository } from './vault.repository';
import { VaultService } from './vault.service';

@Module({
  imports: [ClockModule, AuditModule],
  controllers: [VaultController],
  providers: [VaultRepository, VaultService, SecretChanges],
  exports: [VaultService, SecretChanges],
})
export class VaultModule {}
