// A vitest reporter for `npm test`: after the run, the test files that took
// its time, slowest first, so a suite that got slower is found by reading,
// not by bisecting. A file's time is what the run spent on it: its start-up
// (the worker's harness and the imports) plus every hook and test in it;
// vitest's JSON report times only from a file's first test to its last, so it
// leaves out a beforeAll that starts a control plane.
const COUNT = 15;

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
      .sort((a, b) => b.seconds - a.seconds)
      .slice(0, COUNT);
    if (files.length === 0) return;
    process.stdout.write(`\nslowest ${files.length} test files (start-up, hooks and tests):\n`);
    for (const file of files)
      process.stdout.write(
        `${file.seconds.toFixed(1).padStart(8)} s ${String(file.tests).padStart(5)} tests  ${file.name}\n`,
      );
  }
}
