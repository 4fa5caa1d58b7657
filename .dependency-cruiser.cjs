/**
 * Import boundaries (docs/rules/module-boundaries.md says why):
 * - apps are entry points: nothing imports them but themselves;
 * - a library is entered only through its src/index.ts (two pure faces besides:
 *   auth's scope issuer, and the sessions' caveat token, which the CLI and the
 *   bundled aileron-mcp use offline without loading Nest or Prisma);
 * - platform libraries never import domain libraries;
 * - a domain's pure rules (src/domain/) use no framework, HTTP or database;
 * - only repositories and the database library touch the generated Prisma client;
 * - controllers never make tenant scopes themselves.
 */
const LIB = '^libs/((?:platform/)?[^/]+)/';
module.exports = {
  forbidden: [
    {
      name: 'lib-imports-app',
      severity: 'error',
      comment: 'Dependencies point app → lib, never back.',
      from: { path: '^libs/' },
      to: { path: '^apps/' },
    },
    {
      name: 'app-imports-other-app',
      severity: 'error',
      comment: 'Apps share code through libs only.',
      from: { path: '^apps/([^/]+)/' },
      to: { path: '^apps/', pathNot: '^apps/$1/' },
    },
    {
      name: 'deep-import-into-lib',
      severity: 'error',
      comment: "Use the library's public face (src/index.ts), not its insides.",
      from: { path: '^(apps|libs|test)/', pathNot: [LIB.replace('^', '^') + '.*', '^test/support/global-setup\\.ts$'] },
      to: {
        path: LIB + 'src/',
        pathNot: [LIB + 'src/index\\.ts$', '^libs/auth/src/scope-issuer\\.ts$', '^libs/sessions/src/domain/caveat-token\\.ts$'],
      },
    },
    {
      name: 'deep-import-across-libs',
      severity: 'error',
      comment: "One library reaches another only through its src/index.ts.",
      from: { path: LIB },
      to: { path: LIB + 'src/', pathNot: ['^libs/$1/', LIB + 'src/index\\.ts$', '^libs/auth/src/scope-issuer\\.ts$'] },
    },
    {
      name: 'platform-imports-domain',
      severity: 'error',
      comment: 'Platform libraries are below every domain.',
      from: { path: '^libs/platform/' },
      to: { path: '^libs/(?!platform/)' },
    },
    {
      name: 'pure-domain-rules',
      severity: 'error',
      comment: "A domain's rules are plain TypeScript, testable without Nest, HTTP or a database.",
      from: { path: '^libs/[^/]+/src/domain/' },
      to: { path: '(node_modules/(@nestjs|@prisma|fastify|pg|bullmq|ioredis)/|generated/prisma)', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'prisma-only-in-repositories',
      severity: 'error',
      comment: 'Only *.repository.ts (and the database library) touch Prisma.',
      from: { path: '^libs/', pathNot: ['\\.repository\\.ts$', '^libs/platform/database/'] },
      to: { path: '(node_modules/@prisma/client|generated/prisma)' },
    },
    {
      name: 'scope-issuer-outside-auth',
      severity: 'error',
      comment: 'Requests reach a tenant only through AccessService; controllers never make scopes.',
      from: { path: '\\.controller\\.ts$', pathNot: '^libs/auth/' },
      to: { path: '^libs/auth/src/scope-issuer\\.ts$' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(generated/prisma|\\.spec\\.ts$)' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
