import { Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, Principal } from '@aileron/auth';
import { Route } from '@aileron/http';
import { agentConfigQuery, agentConfigView } from './agent-config.schemas';
import { AgentConfigService } from './agent-config.service';
import { inWorkspace, sessionsAlias } from './agent-session-routes';
import { idParams, wsIdParams } from './agent-sessions.schemas';

const AGENT_CONFIG = {
  summary: 'The snippet that registers aileron-mcp in a coding agent, for this session',
  description:
    "For whoever may read the session (its creator, a member of its workspace, the gateway that started it); not for the session's own token. The URL, session and workspace are written in; the caveat token never is: the snippet passes AILERON_TOKEN on from the agent's environment.",
  tag: 'sessions',
  gateways: true,
  query: agentConfigQuery,
  response: agentConfigView,
  example: { params: { id: '{session}' }, query: { agent: 'codex' } },
} as const;

@Controller()
export class AgentConfigController {
  constructor(private readonly agentConfig: AgentConfigService) {}

  @Route({ ...AGENT_CONFIG, method: 'GET', ...inWorkspace('/:id/agent-config') })
  renderIn(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof wsIdParams>,
    @Query() query: z.infer<typeof agentConfigQuery>,
  ): Promise<z.infer<typeof agentConfigView>> {
    return this.agentConfig.render(caller, { id: params.id, workspace: params.ws }, query.agent, query.command);
  }

  @Route({ ...AGENT_CONFIG, method: 'GET', ...sessionsAlias('/:id/agent-config', AGENT_CONFIG.description) })
  render(
    @Caller() caller: Principal,
    @Param() params: z.infer<typeof idParams>,
    @Query() query: z.infer<typeof agentConfigQuery>,
  ): Promise<z.infer<typeof agentConfigView>> {
    return this.agentConfig.render(caller, { id: params.id }, query.agent, query.command);
  }
}
