import { Controller, Param, Query } from '@nestjs/common';
import { z } from 'zod';
import { Caller, Principal } from '@aileron/auth';
import { Route } from '@aileron/http';
import { agentConfigQuery, agentConfigView } from './agent-config.schemas';
import { AgentConfigService } from './agent-config.service';
import { idParams } from './sessions.schemas';

@Controller()
export class AgentConfigController {
  constructor(private readonly agentConfig: AgentConfigService) {}

  @Route({
    method: 'GET',
    path: '/v1/sessions/:id/agent-config',
    summary: 'The snippet that registers aileron-mcp in a coding agent, for this session',
    description:
      "For whoever may read the session (its creator, a member of its workspace, the gateway that started it); not for the session's own token. The URL, session and workspace are written in; the caveat token never is: the snippet passes AILERON_TOKEN on from the agent's environment.",
    tag: 'sessions',
    tenancy: 'caller',
    gateways: true,
    params: idParams,
    query: agentConfigQuery,
    response: agentConfigView,
    example: { params: { id: '{session}' }, query: { agent: 'codex' } },
  })
  render(@Caller() caller: Principal, @Param() params: z.infer<typeof idParams>, @Query() query: z.infer<typeof agentConfigQuery>): Promise<z.infer<typeof agentConfigView>> {
    return this.agentConfig.render(caller, params.id, query.agent, query.command);
  }
}
