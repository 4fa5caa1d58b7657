import { Injectable } from '@nestjs/common';
import type { SandboxRecord } from './sandboxes.repository';
import type { SessionState, ToolCaller } from './sandbox-tools';

/** The workspace's shell rules, decided for each `bash` command before it runs. */
@Injectable()
export class ShellRulesService {
  async gate(_who: ToolCaller, _sandbox: SandboxRecord, _command: string, _workdir: string, _signal: AbortSignal, _state: SessionState | null): Promise<{ stderr: string; exitCode: number } | null> {
    return null;
  }
}
