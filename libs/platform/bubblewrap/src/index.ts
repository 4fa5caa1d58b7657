export { systemRootArgs } from './system-root';
