export { ConnectionsModule } from './connections.module';
export { ConnectionTokens, ConnectionUnavailableError } from './connection-tokens.service';
export type { UpstreamBearer } from './connection-tokens.service';
export { ConnectionEvents } from './connection-events';
export * from './domain/connection';
