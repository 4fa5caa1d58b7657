// What every part of the migrator uses. No path aliases anywhere in this folder:
// scripts/db-migrate-new.mjs loads it on its own, without the rest of the build.

export type Log = (line: string) => void;
export type Row = Record<string, unknown>;
export type Query = (sql: string, params?: unknown[]) => Promise<Row[]>;

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
