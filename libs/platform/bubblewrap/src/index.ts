export { type Isolation, isolationArgs, tmpfsArgs } from './isolation';
export { systemRootArgs } from './system-root';
export { FIRST_FD_PAST_DOOR, HostDoor, type HostUser, type LaunchOptions } from './host-door';
export { DirectoryUsers, type DirectoryUsersOptions, HOST_UID_COUNT } from './directory-users';
export {
  type CgroupController,
  type CgroupsOfProcess,
  SandboxCgroups,
  type SandboxCgroupLimits,
} from './sandbox-cgroups';
export { endProcessesOfUser, processesOfUser } from './host-processes';
