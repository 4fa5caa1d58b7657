import { join } from 'node:path';
import { Logger, Module } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { ApprovalsModule } from '@aileron/approvals';
import { ClockModule } from '@aileron/clock';
import { PolicyModule } from '@aileron/policy';
import { PoolModule } from '@aileron/pool';
import { compiledRunnerPath } from './bundles';
import type { SandboxDriver } from './drivers/driver';
import { quantityBytes } from './domain/quantity';
import { LocalSandboxDriver } from './drivers/local-sandbox-driver';
import { SandboxFilesService } from './sandbox-files.service';
import { SandboxToolServer } from './sandbox-tool-server';
import { SandboxesController } from './sandboxes.controller';
import { SandboxesRepository } from './sandboxes.repository';
import { SANDBOX_DRIVER, SandboxesService } from './sandboxes.service';
import { ShellRulesService } from './shell-rules.service';

async function driverFor(config: AppConfig): Promise<SandboxDriver> {
  const logger = new Logger('Sandbox');
  if (config.sandboxes.driver === 'kubernetes') {
    // loaded here only: the Kubernetes client is a second of start-up and ~28 MB the local driver never needs
    const { kubernetesSandboxDriverFor } = await import('./kubernetes.js');
    return kubernetesSandboxDriverFor(config, (line) => logger.log(line));
  }
  const { tmpfsMb, uidBase, storage, defaultLimits, cpus } = config.sandboxes;
  return new LocalSandboxDriver({
    stateDir: join(config.dataDir, 'sandboxes'),
    runnerScript: compiledRunnerPath(),
    // as the Kubernetes driver's NetworkPolicy: the pool's ranges let through besides the public internet
    egress: { allowCidrs: config.pool.egressAllowCidrs },
    log: (line) => logger.log(line),
    tmpfsMb,
    uidBase,
    srcMaxBytes: quantityBytes(storage.files),
    defaultLimits,
    cpus,
  });
}

/**
 * Sandboxes agents work in: their API, their driver, their history, and the
 * sandbox tools served to the pool as the built-in server `sandbox`.
 */
@Module({
  imports: [ClockModule, ApprovalsModule, PolicyModule, PoolModule],
  controllers: [SandboxesController],
  providers: [
    { provide: SANDBOX_DRIVER, inject: [APP_CONFIG], useFactory: driverFor },
    SandboxesRepository,
    SandboxesService,
    ShellRulesService,
    SandboxFilesService,
    SandboxToolServer,
  ],
  exports: [SandboxesService],
})
export class SandboxesModule {}
