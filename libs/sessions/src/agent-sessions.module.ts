import { Module } from '@nestjs/common';
import { ClockModule } from '@aileron/clock';
import { GatewayModule } from '@aileron/gateway';
import { AgentConfigController } from './agent-config.controller';
import { AgentConfigService } from './agent-config.service';
import { SessionCredentials } from './agent-session-credentials.service';
import { SessionKeys } from './agent-session-keys.service';
import { SessionKeysController } from './agent-session-keys.controller';
import { SessionsController } from './agent-sessions.controller';
import { SessionsRepository } from './agent-sessions.repository';
import { SessionsService } from './agent-sessions.service';

@Module({
  imports: [ClockModule, GatewayModule],
  controllers: [SessionsController, SessionKeysController, AgentConfigController],
  providers: [SessionsRepository, SessionKeys, SessionCredentials, SessionsService, AgentConfigService],
  exports: [SessionsService, SessionKeys],
})
export class SessionsModule {}
