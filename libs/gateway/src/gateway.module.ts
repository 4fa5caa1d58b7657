import { Module } from '@nestjs/common';
import { AuditModule } from '@aileron/audit';
import { ClockModule } from '@aileron/clock';
import { CatalogModule } from '@aileron/catalog';
import { PolicyModule } from '@aileron/policy';
import { VaultModule } from '@aileron/vault';
import { BundlesService } from './bundles.service';
import { GatewayApiController } from './gateway-api.controller';
import { GatewayCredentials } from './gateway-credentials.service';
import { GatewayFastPath } from './gateway-fast-path';
import { GatewaySecretsService } from './gateway-secrets.service';
import { GatewayRepository } from './gateway.repository';
import { GatewaysController } from './gateways.controller';
import { GatewaysService } from './gateways.service';

@Module({
  imports: [ClockModule, PolicyModule, CatalogModule, AuditModule, VaultModule],
  controllers: [GatewayApiController, GatewaysController],
  providers: [
    GatewayRepository,
    GatewayCredentials,
    GatewaysService,
    BundlesService,
    GatewayFastPath,
    GatewaySecretsService,
  ],
  exports: [GatewaysService, GatewayCredentials],
})
export class GatewayModule {}
