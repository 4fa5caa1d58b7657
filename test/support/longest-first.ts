import { existsSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** What each test file took in a recorded run (`AILERON_RECORD_DURATIONS=1 npm test`, scripts/slowest-files.mjs). */
export const DURATIONS_FILE = 'test/durations.json';

/**
 * Runs the slowest files first, from the durations a
 * recorded run left in test/durations.json: the short ones then fill the
 * workers' gaps at the end instead of a long one starting last and running
 * alone. Vitest's own order needs its cache, which a fresh clone (CI) does
 * not have.
 * A file the record does not know yet counts as a typical one.
 */
export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const recorded: Record<string, number> = existsSync(DURATIONS_FILE)
      ? (JSON.parse(readFileSync(DURATIONS_FILE, 'utf8')) as Record<string, number>)
      : {};
    const known = Object.values(recorded).sort((a, b) => a - b);
    const typical = known[Math.floor(known.length / 2)] ?? 0;
    const seconds = (file: TestSpecification): number =>
      recorded[relative(file.project.config.root, file.moduleId)] ?? typical;
    return [...files].sort((a, b) => seconds(b) - seconds(a));
  }
}
