export { systemRootArgs } from './system-root';
export { HostDoor, type HostUser, type LaunchOptions } from './host-user';
export { PidsCgroups } from './pids-cgroup';
export { endProcessesOfUser, processesOfUser } from './host-processes';
