/**
 * Import boundaries (docs/rules/module-boundaries.md says why):
 * - apps are entry points: nothing imports them but themselves;
 * - a library is entered only through its src/index.ts (and named second faces:
 *   auth's scope issuer; the pool's bridge parts, which the bridge program loads without Nest;
 *   the sessions' caveat token, which the CLI and the bundled aileron-mcp use offline;
 *   the sandboxes' runner protocol, which the bundled sandbox runner and git helper speak);
 * - platform libraries never import domain libraries;
 * - a domain's pure rules (src/domain/) use no framework, HTTP or database;
 * - only repositories and the database library touch the generated Prisma client;
 * - only named system contexts make tenant scopes themselves; requests get theirs from AccessService;
 * - Redis only through the redis library.
 * One inside is open to tests: the policy specification
 * (libs/policy/src/domain/reference-evaluator.ts), which the differential test
 * holds the engine to and production code never calls.
 */
const LIB = '^libs/((?:platform/)?[^/]+)/';
const POLICY_SPECIFICATION = '^libs/policy/src/domain/reference-evaluator\\.ts$';
/** Public faces besides src/index.ts, each a tsconfig path of its own (@aileron/auth/scope-issuer, @aileron/pool/bridge, @aileron/sessions/caveat-token, @aileron/sandboxes/runner-protocol, @aileron/config/paths). */
const SECOND_FACES = [
  '^libs/auth/src/scope-issuer\\.ts$',
  '^libs/pool/src/bridge/index\\.ts$',
  '^libs/sessions/src/domain/caveat-token\\.ts$',
  '^libs/sandboxes/src/runner-protocol/index\\.ts$',
  '^libs/platform/config/src/paths\\.ts$',
  // the Kubernetes drivers, apart so that a control plane on the local drivers never loads the Kubernetes client
  '^libs/pool/src/kubernetes\\.ts$',
  '^libs/sandboxes/src/kubernetes\\.ts$',
];
/**
 * The domains' layers, lowest first (docs/rules/module-boundaries.md): a domain imports
 * only domains of lower layers, never one of its own layer or above, so each layer can be
 * understood, tested and changed with only what is below it in mind. `domains` is the
 * composition root that wires every domain into the app.
 */
const LAYERS = [
  ['auth'],
  ['tenancy', 'audit', 'catalog', 'events', 'webhooks', 'oauth'],
  ['policy', 'vault'],
  ['approvals', 'gateway', 'connections'],
  ['pool', 'sessions'],
  ['sandboxes', 'overview'],
  ['domains'],
];
const layerRules = LAYERS.slice(0, -1).map((layer, at) => ({
  name: `layer-${at + 1}-imports-above`,
  severity: 'error',
  comment: `${layer.join(', ')} may import only the domains of lower layers (${LAYERS.slice(0, at).flat().join(', ') || 'none'}) and platform libraries.`,
  from: { path: `^libs/(${layer.join('|')})/` },
  to: { path: `^libs/(${LAYERS.slice(at).flat().join('|')})/`, pathNot: '^libs/$1/' },
}));
/** what a domain's pure rules may never load (and, .dependency-cruiser.runtime.cjs, never reach) */
const FRAMEWORKS = 'node_modules/(@nestjs|@prisma|fastify|pg|bullmq|ioredis)/|generated/prisma';

module.exports = {
  forbidden: [
    ...layerRules,
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
      comment: 'One library reaches another only through its src/index.ts.',
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
      to: { path: `(${FRAMEWORKS})`, dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'prisma-only-in-repositories',
      severity: 'error',
      comment: 'Only *.repository.ts (and the database library) touch Prisma.',
      from: { path: '^libs/', pathNot: ['\\.repository\\.ts$', '^libs/platform/database/'] },
      to: { path: '(node_modules/@prisma/client|generated/prisma)' },
    },
    {
      name: 'system-scopes-in-system-contexts',
      severity: 'error',
      comment:
        'SystemScopes makes a scope without checking a caller: only the named system contexts below may use it ' +
        '(docs/rules/tenancy.md). A request gets its scope from AccessService.',
      from: {
        path: '^(libs|apps)/',
        pathNot: [
          // the auth layer itself: scopes after checking the caller, and authentication before a tenant is known
          '^libs/auth/src/(access\\.service|auth\\.guard|principal\\.resolver|jwt-keys\\.service|oidc-sign-in\\.service|sign-in-links\\.service|scope-issuer)\\.ts$',
          // and the issuer's own spec
          '^libs/auth/src/scope-issuer\\.spec\\.ts$',
          // the gateway's own authentication, and the fast path that does the auth guard's work for gateway fetches
          '^libs/gateway/src/(gateway-credentials\\.service|gateway-fast-path)\\.ts$',
          // enrolment: the one-time code is the credential and names the tenant
          '^libs/gateway/src/gateways\\.service\\.ts$',
          // bootstrap and new tenants (platform operators)
          '^libs/tenancy/src/(bootstrap|tenancy)\\.service\\.ts$',
          // review links (the link names the approver), the expiry sweep
          '^libs/approvals/src/approvals\\.service\\.ts$',
          // the audit journal of every announced change, checkpoint and retention sweeps, sink deliveries (jobs)
          '^libs/audit/src/(audit|audit-sinks)\\.service\\.ts$',
          // the root-key rewrap across every workspace
          '^libs/vault/src/vault\\.service\\.ts$',
          // webhook deliveries (jobs whose payload names the organisation), and which organisations have no endpoint
          '^libs/webhooks/src/(webhook-delivery\\.service|quiet-organizations)\\.ts$',
          // agent sessions: their caveat tokens' authentication, and sessions addressed by id (like approvals)
          '^libs/sessions/src/(agent-session-credentials|agent-sessions)\\.service\\.ts$',
          // OAuth: the provider's own records and token lookups (the credential names the tenant), registration, the expiry sweep
          '^libs/oauth/src/(oauth-provider\\.service|oauth-access-tokens\\.service|oauth-fast-path|oauth-sweep\\.service)\\.ts$',
          // upstream connections: the callback's state names the tenant, and the sweep of unfinished starts
          '^libs/connections/src/(connection-flow\\.service|connections-sweep\\.service)\\.ts$',
          // pool calls on an admitted MCP session, and the execution journal's replay after a crash
          '^libs/pool/src/(pool-calls\\.service|execution-journal)\\.ts$',
        ],
      },
      to: { path: '^libs/auth/src/scope-issuer\\.ts$' },
    },
    {
      name: 'redis-through-the-provider',
      severity: 'error',
      comment:
        'Redis only through @aileron/redis: every key and channel under the prefix, no unbounded wait (docs/rules/redis.md).',
      from: { path: '^(apps|libs)/', pathNot: '^libs/platform/redis/' },
      to: { path: 'node_modules/ioredis/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'peers-only-in-bench',
      severity: 'error',
      comment:
        'supergateway and mcp-proxy are what the peers bench measures the pool against: dev dependencies of bench/ alone, never loaded by the product or its tests.',
      from: { path: '^(apps|libs|test)/' },
      to: { path: 'node_modules/(supergateway|mcp-proxy)/' },
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
    // specs are cruised too: a spec that reaches into another library's insides couples them as surely as code does
    exclude: { path: 'generated/prisma' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
