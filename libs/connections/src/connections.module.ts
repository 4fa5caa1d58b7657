import { Module } from '@nestjs/common';
import { CatalogModule } from '@aileron/catalog';
import { ClockModule } from '@aileron/clock';
import { VaultModule } from '@aileron/vault';
import { ConnectPagesController } from './connect-pages.controller';
import { ConnectionEvents } from './connection-events';
import { ConnectionFlow } from './connection-flow.service';
import { ConnectionTokens } from './connection-tokens.service';
import { ConnectionsController } from './connections.controller';
import { ConnectionsRepository } from './connections.repository';
import { ConnectionsSweep } from './connections-sweep.service';

/** The pool as an OAuth client of upstream MCP servers: connections, their tokens in the vault (docs/oauth.md). */
@Module({
  imports: [ClockModule, CatalogModule, VaultModule],
  controllers: [ConnectionsController, ConnectPagesController],
  providers: [ConnectionsRepository, ConnectionEvents, ConnectionFlow, ConnectionTokens, ConnectionsSweep],
  exports: [ConnectionTokens, ConnectionEvents],
})
export class ConnectionsModule {}
