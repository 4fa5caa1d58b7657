export * from './domain/credentials';
export * from './domain/etag';
export * from './domain/policy-bundle';
export { GatewayModule } from './gateway.module';
export { GatewaysService } from './gateways.service';
export { GatewayCredentials } from './gateway-credentials.service';
