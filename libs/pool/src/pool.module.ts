import { join } from 'node:path';
import { Logger, Module } from '@nestjs/common';
import { ApprovalsModule } from '@aileron/approvals';
import { AuditModule } from '@aileron/audit';
import { CatalogModule } from '@aileron/catalog';
import { ClockModule } from '@aileron/clock';
import { ConnectionsModule } from '@aileron/connections';
import { APP_CONFIG, AppConfig, projectRoot } from '@aileron/config';
import { PolicyModule } from '@aileron/policy';
import { VaultModule } from '@aileron/vault';
import { compiledBridgePath } from './bridge/compiled-bridge';
import { BuiltinServers } from './builtin-servers';
import { PoolCalls } from './pool-calls.service';
import { InstanceDriver } from './drivers/driver';
import { LocalDriver } from './drivers/local/local-driver';
import { ExecutionJournal } from './execution-journal';
import { INSTANCE_DRIVER, PoolInstances } from './pool-instances.service';
import { McpAdmission } from './mcp-admission';
import { McpController } from './mcp.controller';
import { McpFastPath } from './mcp-fast-path';
import { PoolController } from './pool.controller';
import { PoolRateLimits } from './pool-rate-limits.service';
import { SecretRotation } from './secret-rotation.service';
import { McpSessions } from './mcp-sessions.service';
import { ToolPinsRepository } from './tool-pins.repository';
import { ToolPins } from './tool-pins.service';

/** The driver the configuration names; both are reached the same way (Streamable HTTP). */
async function driverFor(config: AppConfig): Promise<InstanceDriver> {
  const logger = new Logger('PoolInstance');
  const log = (line: string): void => logger.log(line);
  if (config.pool.driver === 'kubernetes') {
    // loaded here only: the Kubernetes client is a second of start-up and ~28 MB the local driver never needs
    const { kubernetesDriverFor } = await import('./kubernetes.js');
    return kubernetesDriverFor(config, log);
  }
  // the bridge runs compiled (from dist even when the control plane runs from source, as in tests);
  // the sandbox may read code and packages, never the project root that holds the data dir
  const root = projectRoot();
  return new LocalDriver({
    stateDir: join(config.dataDir, 'pool', 'instances'),
    sandbox: config.pool.sandbox,
    bridgeScript: compiledBridgePath(),
    readOnlyPaths: [join(root, 'node_modules'), join(root, 'dist')],
    uidBase: config.pool.uidBase,
    log,
  });
}

@Module({
  imports: [ClockModule, CatalogModule, PolicyModule, ApprovalsModule, VaultModule, AuditModule, ConnectionsModule],
  controllers: [McpController, PoolController],
  providers: [
    { provide: INSTANCE_DRIVER, inject: [APP_CONFIG], useFactory: driverFor },
    PoolInstances,
    McpSessions,
    BuiltinServers,
    McpAdmission,
    McpFastPath,
    PoolCalls,
    PoolRateLimits,
    ExecutionJournal,
    ToolPins,
    ToolPinsRepository,
    SecretRotation,
  ],
  exports: [PoolInstances, McpSessions, ExecutionJournal, BuiltinServers],
})
export class PoolModule {}
