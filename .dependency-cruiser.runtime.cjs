/**
 * What runs, not what type-checks: the same cruise without type-only imports
 * (TypeScript erases them), for the rules about what a module loads through
 * everything it imports. A domain's rule that imports a helper which imports
 * Nest loads Nest as surely as one that imports it itself. `npm run lint`
 * starts this cruise at the domain folders (libs/<lib>/src/domain): it follows
 * what they import, which is all the rule reads, in half the CPU of cruising
 * every lib.
 */
const base = require('./.dependency-cruiser.cjs');
const { to: loads } = base.forbidden.find((rule) => rule.name === 'pure-domain-rules');

module.exports = {
  forbidden: [
    {
      name: 'pure-domain-rules-reach',
      severity: 'error',
      comment:
        "A domain's rules stay pure through what they import: no module they reach loads Nest, HTTP or a database.",
      from: { path: '^libs/[^/]+/src/domain/', pathNot: '\\.spec\\.ts$' },
      to: { path: loads.path, reachable: true },
    },
  ],
  options: { ...base.options, tsPreCompilationDeps: false },
};
