import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(__dirname, '..', '..');
/** the top-level folders a doc names files in; a name with `<…>` or `*` is a pattern, whose fixed part must exist */
const NAMED = /`((?:apps|libs|test|bench|scripts|helm|images|docs|prisma)\/[^`\s]*)`/g;

function docs(): string[] {
  const inDocs = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? inDocs(join(dir, entry.name)) : entry.name.endsWith('.md') ? [join(dir, entry.name)] : [],
    );
  return ['README.md', ...inDocs('docs')];
}

/**
 * A reader follows the paths the docs name (the tour, the security review's
 * tables, the rules): each must lead somewhere. A moved or renamed file
 * breaks this test rather than a reader's trust.
 */
describe('the files the docs name', () => {
  it('exist (a pattern: the folder it starts in)', () => {
    const missing: string[] = [];
    for (const doc of docs()) {
      for (const [, named] of readFileSync(join(ROOT, doc), 'utf8').matchAll(NAMED)) {
        const path = named!.replace(/[:#].*$/, '').replace(/[.,;]$/, '');
        const found = existsSync(join(ROOT, path.split(/[<*]/)[0]!));
        if (!found) missing.push(`${doc}: ${path}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
