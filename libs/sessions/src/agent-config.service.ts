import { Inject, Injectable } from '@nestjs/common';
import { Principal } from '@aileron/auth';
import { Clock } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { ConflictError } from '@aileron/errors';
import { Agent, AgentConfig, renderAgentConfig } from './domain/agent-config';
import { SessionRef, AgentSessionsService } from './agent-sessions.service';

/** The snippet that registers aileron-mcp in an agent, for someone who may read the session. */
@Injectable()
export class AgentConfigService {
  constructor(
    private readonly sessions: AgentSessionsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clock: Clock,
  ) {}

  async render(caller: Principal, ref: SessionRef, agent: Agent, command: string): Promise<AgentConfig> {
    const { session } = await this.sessions.get(caller, ref);
    // a config for a session whose token is already refused would only fail later, inside the sandbox
    if (session.endedAt || session.expiresAt <= this.clock.date())
      throw new ConflictError(
        'SESSION_CLOSED',
        'The session has ended; a configuration for it would only fail inside the sandbox',
      );
    return renderAgentConfig(agent, {
      url: this.config.publicUrl,
      sessionId: session.id,
      workspace: session.workspaceSlug,
      command,
    });
  }
}
