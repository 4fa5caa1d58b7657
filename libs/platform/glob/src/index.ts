export { compileNameGlob, isNameGlob } from './name-glob';
export type { NameGlob } from './name-glob';
export { compilePathGlob, GlobSyntaxError, matchingPaths, MAX_GLOB_LENGTH } from './path-glob';
export type { PathGlob } from './path-glob';
