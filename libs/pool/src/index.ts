export { PoolModule } from './pool.module';
export { PoolInstances, Instance, PoolError } from './instances.service';
export { PoolSessions } from './sessions.service';
export { ExecutionJournal } from './execution-journal';
export type { InstanceDriver, InstanceSpec, RunningInstance, InstanceEndpoint, InstanceExit } from './drivers/driver';
