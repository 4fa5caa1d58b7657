/**
 * The sandboxes' second face, `@aileron/sandboxes/runner-protocol`: what the
 * control plane and the programs of apps/sandbox-runner and apps/git-helper
 * say to each other, and how every git of a sandbox's history runs. Node
 * built-ins only: the programs are bundled from it into one file each, with
 * nothing of Nest or Prisma.
 */
export * from './protocol';
export * from './git-safety';
