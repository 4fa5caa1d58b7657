#!/usr/bin/env node
// `npm test`: builds, lints (import boundaries + types), then runs every vitest
// suite (unit specs, integration, end-to-end) against real PostgreSQL, Redis and
// PGlite, which the run starts itself unless DATABASE_URL / REDIS_URL are set.
// The last line sums every suite as "N passed, N failed".
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const extra = process.argv.slice(2);
let passed = 0;
let failed = 0;

function step(name, command, args, env = {}) {
  process.stdout.write(`\n=== ${name}: ${command} ${args.join(' ')}\n`);
  const result = spawnSync(command, args, { stdio: 'inherit', env: { ...process.env, ...env } });
  return result.status === 0;
}

if (step('build', 'npm', ['run', '--silent', 'build'])) passed++;
else {
  failed++;
  process.stdout.write(`\n${passed} passed, ${failed} failed\n`);
  process.exit(1);
}
if (step('lint', 'npm', ['run', '--silent', 'lint'])) passed++;
else failed++;

const dir = mkdtempSync(join(tmpdir(), 'aileron-results-'));
const report = join(dir, 'vitest.json');
const ok = step('vitest', 'npx', ['vitest', 'run', '--reporter=default', '--reporter=json', '--reporter=./scripts/slowest-files.mjs', `--outputFile.json=${report}`, ...extra]);
try {
  const results = JSON.parse(readFileSync(report, 'utf8'));
  passed += results.numPassedTests;
  // vitest exiting non-zero with no failed test (no files, a global setup that threw) is still a failed run
  failed += results.numFailedTests + (!ok && results.numFailedTests === 0 ? 1 : 0);
  // a test that does not run proves nothing: count it against the run
  const notRun = results.numPendingTests + results.numTodoTests;
  if (notRun > 0) process.stdout.write(`${notRun} test(s) did not run (skip/todo); counted as failed\n`);
  failed += notRun;
} catch {
  failed++; // vitest died before writing its report
}
rmSync(dir, { recursive: true, force: true });
process.stdout.write(`\n${passed} passed, ${failed} failed\n`);
process.exit(failed === 0 ? 0 : 1);
