import { join } from 'node:path';
import { Logger, Module } from '@nestjs/common';
import { ApprovalsModule } from '@aileron/approvals';
import { AuditModule } from '@aileron/audit';
import { CatalogModule } from '@aileron/catalog';
import { ClockModule } from '@aileron/clock';
import { APP_CONFIG, AppConfig, projectRoot } from '@aileron/config';
import { loadKubeConfig } from '@aileron/kubernetes';
import { PolicyModule } from '@aileron/policy';
import { VaultModule } from '@aileron/vault';
import { compiledBridgePath } from './bridge/compiled-bridge';
import { BuiltinServers } from './builtin-servers';
import { PoolCalls } from './pool-calls.service';
import { InstanceDriver } from './drivers/driver';
import { KubernetesDriver, type KubernetesDriverOptions } from './drivers/kubernetes/kubernetes-driver';
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

/** The Kubernetes driver's options from the configuration (the Helm chart's values reach it through these). */
export function kubernetesPoolOptions(config: AppConfig): Omit<KubernetesDriverOptions, 'kubeConfig' | 'log'> {
  return {
    namespace: config.pool.kubernetesNamespace,
    runnerImage: config.pool.runnerImage,
    egressAllowCidrs: config.pool.egressAllowCidrs,
    egressExceptCidrs: config.pool.egressExceptCidrs,
    controlPlanePod: config.pool.controlPlanePod,
    ...(config.pool.controlPlaneNamespace ? { controlPlaneNamespace: config.pool.controlPlaneNamespace } : {}),
  };
}

/** The driver the configuration names; both are reached the same way (Streamable HTTP). */
function driverFor(config: AppConfig): InstanceDriver {
  const logger = new Logger('PoolInstance');
  const log = (line: string): void => logger.log(line);
  if (config.pool.driver === 'kubernetes') {
    return new KubernetesDriver({ ...kubernetesPoolOptions(config), kubeConfig: loadKubeConfig(), log });
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
  imports: [ClockModule, CatalogModule, PolicyModule, ApprovalsModule, VaultModule, AuditModule],
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
