export { PeriodicTask } from './periodic-task';
export type { PeriodicTaskOptions, TaskLogger } from './periodic-task';
export { KeyedThrottle } from './keyed-throttle';
export { DeadlineSweep, drain, NextDue } from './next-due';
export type { DeadlineSweepOptions } from './next-due';
