import { Module } from '@nestjs/common';
import { CatalogModule } from '@aileron/catalog';
import { PolicyModule } from '@aileron/policy';
import { BundlesService } from './bundles.service';
import { GatewayApiController } from './gateway-api.controller';
import { GatewayCredentials } from './gateway-credentials.service';
import { GatewayFastPath } from './gateway-fast-path';
import { GatewayRepository } from './gateway.repository';
import { GatewaysController } from './gateways.controller';
import { GatewaysService } from './gateways.service';
import { SigningKeysService } from './signing-keys.service';

@Module({
  imports: [PolicyModule, CatalogModule],
  controllers: [GatewayApiController, GatewaysController],
  providers: [GatewayRepository, GatewayCredentials, GatewaysService, SigningKeysService, BundlesService, GatewayFastPath],
  exports: [GatewaysService, SigningKeysService, GatewayCredentials],
})
export class GatewayModule {}
