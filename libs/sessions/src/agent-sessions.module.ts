import { Module } from '@nestjs/common';
import { ClockModule } from '@aileron/clock';
import { GatewayModule } from '@aileron/gateway';
import { AgentConfigController } from './agent-config.controller';
import { AgentConfigService } from './agent-config.service';
import { AgentSessionCredentials } from './agent-session-credentials.service';
import { AgentSessionKeys } from './agent-session-keys.service';
import { AgentSessionKeysController } from './agent-session-keys.controller';
import { AgentSessionsController } from './agent-sessions.controller';
import { AgentSessionsRepository } from './agent-sessions.repository';
import { AgentSessionsService } from './agent-sessions.service';

@Module({
  imports: [ClockModule, GatewayModule],
  controllers: [AgentSessionsController, AgentSessionKeysController, AgentConfigController],
  providers: [
    AgentSessionsRepository,
    AgentSessionKeys,
    AgentSessionCredentials,
    AgentSessionsService,
    AgentConfigService,
  ],
  exports: [AgentSessionsService, AgentSessionKeys],
})
export class AgentSessionsModule {}
