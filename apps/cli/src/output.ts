/** Everything the commands print goes through here, so stdout stays clean for `$(…)`. */
export function out(line = ''): void {
  process.stdout.write(line + '\n');
}

/** Notes for the person at the terminal; scripts capturing stdout never see them. */
export function note(line: string): void {
  process.stderr.write(`aileron-cp: ${line}\n`);
}

export function printJson(value: unknown): void {
  out(JSON.stringify(value, null, 2));
}

type Cell = string | number | boolean | null | undefined;

/** Left-aligned columns, a header in capitals, "-" for empty cells. */
export function printTable(headers: string[], rows: Cell[][]): void {
  const text = rows.map((row) =>
    row.map((cell) => (cell === null || cell === undefined || cell === '' ? '-' : String(cell))),
  );
  const widths = headers.map((h, i) => Math.max(h.length, ...text.map((row) => row[i]?.length ?? 0)));
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  out(line(headers.map((h) => h.toUpperCase())));
  for (const row of text) out(line(row));
}

/** ISO timestamps to the second: milliseconds only make table rows wider. */
export function when(iso: string | null | undefined): string | null {
  return iso ? iso.replace(/\.\d+Z$/, 'Z') : null;
}
