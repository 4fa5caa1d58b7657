/**
 * Import boundaries (docs/rules/module-boundaries.md says why):
 * - apps are entry points: nothing imports them but themselves;
 * - a library is entered only through its src/index.ts (and two named second faces:
 *   auth's scope issuer, and the pool's bridge parts, which the bridge program loads without Nest);
 * - platform libraries never import domain libraries;
 * - a domain's pure rules (src/domain/) use no framework, HTTP or database;
 * - only repositories and the database library touch the generated Prisma client;
 * - controllers never make tenant scopes themselves.
 * One inside is open to tests: the policy specification
 * (libs/policy/src/domain/reference-evaluator.ts), which the differential test
 * holds the engine to and production code never calls.
 */
const LIB = '^libs/((?:platform/)?[^/]+)/';
const POLICY_SPECIFICATION = '^libs/policy/src/domain/reference-evaluator\\.ts$';
/** Public faces besides src/index.ts, each a tsconfig path of its own (@aileron/auth/scope-issuer, @aileron/pool/bridge). */
const SECOND_FACES = ['^libs/auth/src/scope-issuer\\.ts$', '^libs/pool/src/bridge/index\\.ts$'];
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
        pathNot: [LIB + 'src/index\\.ts$', ...SECOND_FACES, POLICY_SPECIFICATION],
      },
    },
    {
      name: 'policy-specification-outside-tests',
      severity: 'error',
      comment: 'The policy specification is for tests; the service decides with the engine.',
      from: { path: '^(apps|libs)/' },
      to: { path: POLICY_SPECIFICATION },
    },
    {
      name: 'deep-import-across-libs',
      severity: 'error',
      comment: "One library reaches another only through its src/index.ts.",
      from: { path: LIB },
      to: { path: LIB + 'src/', pathNot: ['^libs/$1/', LIB + 'src/index\\.ts$', ...SECOND_FACES] },
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
