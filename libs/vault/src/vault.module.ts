import { Module } from '@nestjs/common';
import { AuditModule } from '@aileron/audit';
import { VaultController } from './vault.controller';
import { VaultRepository } from './vault.repository';
import { VaultService } from './vault.service';

@Module({
  imports: [AuditModule],
  controllers: [VaultController],
  providers: [VaultRepository, VaultService],
  exports: [VaultService],
})
export class VaultModule {}
