import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * What the README promises operators, read the way they read it: the start
 * commands of the server mode, the images table, the configuration table.
 * The self-hosting tests hold images, compose file and chart to these.
 */

export const ROOT = join(__dirname, '..', '..');

function readme(): string {
  return readFileSync(join(ROOT, 'README.md'), 'utf8');
}

/** The text under a heading (any level), up to the next heading of the same or a higher level. */
export function readmeSection(heading: string): string {
  const lines = readme().split('\n');
  const start = lines.findIndex((line) => /^#{2,4} /.test(line) && line.replace(/^#+ /, '').trim() === heading);
  if (start < 0) throw new Error(`README.md has no section "${heading}"`);
  const level = lines[start]!.indexOf(' ');
  const rest = lines.slice(start + 1);
  const end = rest.findIndex((line) => /^#+ /.test(line) && line.indexOf(' ') <= level);
  return rest.slice(0, end < 0 ? undefined : end).join('\n');
}

export function codeSpans(text: string): string[] {
  return [...text.matchAll(/`([^`]+)`/g)].map((match) => match[1]!);
}

/** The rows of the first Markdown table in a text, as cells (header and rule left out). */
export function tableRows(text: string): string[][] {
  const rows = text.split('\n').filter((line) => line.startsWith('|'));
  return rows.slice(2).map((row) =>
    row
      .replace(/^\||\|$/g, '')
      .split(/(?<!\\)\|/)
      .map((cell) => cell.trim()),
  );
}

/** The shell lines of the fenced code blocks in a text, comments removed. */
export function shellLines(text: string): string[] {
  const blocks = [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!);
  return blocks.flatMap((block) =>
    block
      .split('\n')
      .map((line) => line.replace(/\s+#.*$/, '').trim())
      .filter(Boolean),
  );
}

/**
 * The command the README's server mode gives for a script, as argv: the
 * line that runs `node <script>` (inside `$(…)` too), e.g.
 * `node bin/aileron-cp.js migrate`.
 */
export function serverModeCommand(script: string, subcommand?: string): string[] {
  for (const line of shellLines(readmeSection('Server mode'))) {
    const command = line.replace(/^[A-Z_]+=\$\((.*)\)$/, '$1').split(/\s+/);
    if (command[0] === 'node' && command[1] === script && (subcommand === undefined || command[2] === subcommand))
      return command;
  }
  throw new Error(`README.md's server mode runs no \`node ${script}${subcommand ? ` ${subcommand}` : ''}\``);
}

/** The variables of the README's configuration table. */
export function documentedSettings(): string[] {
  return tableRows(readmeSection('Configuration')).map((cells) => codeSpans(cells[0]!)[0]!);
}
