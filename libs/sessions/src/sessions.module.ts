import { Module } from '@nestjs/common';
import { ClockModule } from '@aileron/clock';
import { GatewayModule } from '@aileron/gateway';
import { AgentConfigController } from './agent-config.controller';
import { AgentConfigService } from './agent-config.service';
import { SessionCredentials } from './session-credentials.service';
import { SessionKeys } from './session-keys.service';
import { SessionKeysController } from './session-keys.controller';
import { SessionsController } from './sessions.controller';
import { SessionsRepository } from './sessions.repository';
import { SessionsService } from './sessions.service';

@Module({
  imports: [ClockModule, GatewayModule],
  controllers: [SessionsController, SessionKeysController, AgentConfigController],
  providers: [SessionsRepository, SessionKeys, SessionCredentials, SessionsService, AgentConfigService],
  exports: [SessionsService, SessionKeys],
})
export class SessionsModule {}
