export { compileNameGlob, isNameGlob } from './name-glob';
export type { NameGlob } from './name-glob';
