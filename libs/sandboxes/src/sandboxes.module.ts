import { join } from 'node:path';
import { Logger, Module } from '@nestjs/common';
import { APP_CONFIG, AppConfig, projectRoot } from '@aileron/config';
import { ApprovalsModule } from '@aileron/approvals';
import { PoolModule } from '@aileron/pool';
import type { SandboxDriver } from './drivers/driver';
import { LocalSandboxDriver } from './drivers/local-driver';
import { SandboxToolServer } from './sandbox-tool-server';
import { SandboxesController } from './sandboxes.controller';
import { SandboxesRepository } from './sandboxes.repository';
import { SANDBOX_DRIVER, SandboxesService } from './sandboxes.service';
import { ShellRulesService } from './shell-rules.service';

/** The compiled runner (from dist even when the control plane runs from source, as in tests). */
export function compiledRunnerPath(): string {
  return join(projectRoot(), 'dist', 'libs', 'sandboxes', 'src', 'runner', 'runner.js');
}

function driverFor(config: AppConfig): SandboxDriver {
  const logger = new Logger('Sandbox');
  if (config.sandboxes.driver === 'kubernetes') throw new Error('AILERON_SANDBOX_DRIVER=kubernetes is not wired in this release yet; use local');
  return new LocalSandboxDriver({ stateDir: join(config.dataDir, 'sandboxes'), runnerScript: compiledRunnerPath(), log: (line) => logger.log(line) });
}

/**
 * Sandboxes agents work in: their API, their driver, their history, and the
 * sandbox tools served to the pool as the built-in server `sandbox`.
 */
@Module({
  imports: [ApprovalsModule, PoolModule],
  controllers: [SandboxesController],
  providers: [{ provide: SANDBOX_DRIVER, inject: [APP_CONFIG], useFactory: driverFor }, SandboxesRepository, SandboxesService, ShellRulesService, SandboxToolServer],
  exports: [SandboxesService],
})
export class SandboxesModule {}
