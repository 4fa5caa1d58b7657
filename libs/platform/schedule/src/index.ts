export { PeriodicTask } from './periodic-task';
export type { PeriodicTaskOptions, TaskLogger } from './periodic-task';
export { KeyedThrottle } from './keyed-throttle';
export { NextDue } from './next-due';
