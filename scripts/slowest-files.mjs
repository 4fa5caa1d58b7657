// A vitest reporter for `npm test`: after the run, the test files that took
// its time, slowest first, so a suite that got slower is found by reading,
// not by bisecting. A file's time is what the run spent on it: its start-up
// (the worker's harness and the imports) plus every hook and test in it;
// vitest's JSON report times only from a file's first test to its last, so it
// leaves out a beforeAll that starts a control plane.
// With AILERON_RECORD_DURATIONS=1 it also writes every file's time to
// test/durations.json, which orders the next runs (test/support/longest-first.ts).
import { writeFileSync } from 'node:fs';

const COUNT = 15;
const DURATIONS_FILE = 'test/durations.json';

export default class SlowestFiles {
  onInit(vitest) {
    this.root = vitest.config.root;
  }

  onTestRunEnd(testModules) {
    const files = testModules
      .map((module) => {
        const { prepareDuration, environmentSetupDuration, collectDuration, setupDuration, duration } =
          module.diagnostic();
        const ms = prepareDuration + environmentSetupDuration + setupDuration + collectDuration + duration;
        return {
          name: module.moduleId.startsWith(`${this.root}/`)
            ? module.moduleId.slice(this.root.length + 1)
            : module.moduleId,
          seconds: ms / 1000,
          tests: [...module.children.allTests()].length,
        };
      })
      .sort((a, b) => b.seconds - a.seconds);
    if (files.length === 0) return;
    if (process.env.AILERON_RECORD_DURATIONS) {
      const record = Object.fromEntries(
        files.map((file) => [file.name, Math.round(file.seconds * 10) / 10]).sort(([a], [b]) => (a < b ? -1 : 1)),
      );
      writeFileSync(DURATIONS_FILE, `${JSON.stringify(record, null, 2)}\n`);
      process.stdout.write(`\nrecorded the time of ${files.length} test files in ${DURATIONS_FILE}\n`);
    }
    files.splice(COUNT);
    process.stdout.write(`\nslowest ${files.length} test files (start-up, hooks and tests):\n`);
    for (const file of files)
      process.stdout.write(
        `${file.seconds.toFixed(1).padStart(8)} s ${String(file.tests).padStart(5)} tests  ${file.name}\n`,
      );
  }
}
