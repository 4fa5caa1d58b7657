import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const POLICY = resolve('dist/libs/policy/src/index.js');

/**
 * A tenant's pattern must not stall the control plane. The evaluation runs in
 * a child process with a time limit: a backtracking engine would block a test
 * runner's own thread, and no timer could end it.
 */
describe('policy regexes run in linear time', () => {
  it('^(a+)+$ against forty a and a ! decides at once, on the compiled engine the server runs', () => {
    if (!existsSync(POLICY)) throw new Error('build first: npm run build (npm test does)');
    const script = `
      const { compilePolicy } = require(${JSON.stringify(POLICY)});
      const policy = compilePolicy({ rules: [{ id: 'catastrophic', effect: 'deny', arguments: [{ path: 'q', regex: '^(a+)+$' }] }] }, { defaultEffect: 'allow' });
      const decision = policy.evaluate({ server: 'github', tool: 'search', arguments: { q: 'a'.repeat(40) + '!' }, principal: {}, execution_mode: 'remote' });
      const matched = policy.evaluate({ server: 'github', tool: 'search', arguments: { q: 'a'.repeat(40) }, principal: {}, execution_mode: 'remote' });
      process.stdout.write(JSON.stringify([decision.decision, matched.decision]));
    `;
    // a hang guard, not a speed claim: the backtracking engine takes minutes here
    const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(run.error?.message, run.stderr).toBeUndefined();
    expect(JSON.parse(run.stdout)).toEqual(['allow', 'deny']);
  });
});
