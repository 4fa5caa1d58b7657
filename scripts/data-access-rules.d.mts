import type ts from 'typescript';

/** Every breach of the data rules in `program`, one line each (`file:line what`), files named relative to `root`. */
export function dataAccessProblems(typescript: typeof ts, program: ts.Program, root: string): string[];
/** The domain repository files of `program`: a scan that finds none reads the wrong program. */
export function domainRepositoryFiles(typescript: typeof ts, program: ts.Program, root: string): string[];
export function isDomainRepositoryFile(file: string): boolean;
