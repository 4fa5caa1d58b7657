import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../libs/platform/errors/src';
import { buildOpenApi } from '../../libs/platform/http/src';

/**
 * The error-code registry against the source, the docs and the OpenAPI
 * description. The compiler already refuses an unregistered code wherever a
 * DomainError is made; this also reads the source for codes that slip past the
 * type (a problem document written by hand, a string widened on the way).
 */
const root = join(__dirname, '../..');

function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts'))
    .map((e) => relative(root, join(e.parentPath, e.name)))
    .filter((f) => !f.includes('/generated/'));
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s-]/gu, '')
    .replace(/\s/g, '-');
}

/** Each heading's anchor in a markdown file, with the text of its section. */
function sections(file: string): Map<string, string> {
  const out = new Map<string, string>();
  let current: string | null = null;
  for (const line of readFileSync(join(root, file), 'utf8').split('\n')) {
    const heading = /^#{1,6}\s+(.*)$/.exec(line);
    if (heading) out.set((current = anchorOf(heading[1]!)), '');
    else if (current) out.set(current, out.get(current)! + line + '\n');
  }
  return out;
}

/** Codes the source throws or writes into problem documents, with where. */
function codesInSource(): { code: string; where: string }[] {
  const files = [...sourceFiles('libs'), ...sourceFiles('apps')];
  const texts = new Map(files.map((f) => [f, readFileSync(join(root, f), 'utf8')]));
  // DomainError and every class that extends it, transitively
  const errorClasses = new Set(['DomainError']);
  for (let grew = true; grew; ) {
    grew = false;
    for (const text of texts.values()) {
      for (const [, name, base] of text.matchAll(/class (\w+) extends (\w+)/g)) {
        if (errorClasses.has(base!) && !errorClasses.has(name!)) grew = errorClasses.add(name!) !== undefined;
      }
    }
  }
  const found: { code: string; where: string }[] = [];
  const constructors = new RegExp(`new (?:${[...errorClasses].join('|')})\\(([^;]*?)\\)\\s*[;,)]`, 'gs');
  for (const [file, text] of texts) {
    for (const match of text.matchAll(constructors)) {
      for (const [, code] of match[1]!.matchAll(/'([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)'/g))
        found.push({ code: code!, where: file });
    }
    // an error class that fixes its code in its constructor
    for (const [, code] of text.matchAll(/super\(\s*'([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)'/g))
      found.push({ code: code!, where: file });
    // a problem document written by hand: a status and a code side by side
    for (const [, code] of text.matchAll(/status:\s*\d{3},[^}]*?code:\s*'([A-Z_]+)'/g))
      found.push({ code: code!, where: file });
    for (const [, code] of text.matchAll(/code:\s*'([A-Z_]+)'[^}]*?status:\s*\d{3}/g))
      found.push({ code: code!, where: file });
  }
  return found;
}

describe('error codes', () => {
  it('every code the source throws or writes into a problem is registered', () => {
    const found = codesInSource();
    // the scan must see the codes it exists for, or it checks nothing
    expect(found.map((f) => f.code)).toEqual(
      expect.arrayContaining(['APPROVAL_EXPIRED', 'MCP_SERVER_DISABLED', 'WEBHOOK_NOT_FOUND', 'MCP_SESSION_NOT_FOUND']),
    );
    expect(found.filter((f) => !(f.code in ERROR_CODES)).map((f) => `${f.code} (${f.where})`)).toEqual([]);
  });

  it('every code is documented under the heading its anchor names', () => {
    const problems: string[] = [];
    for (const [code, entry] of Object.entries(ERROR_CODES)) {
      const [file, anchor] = entry.docs.split('#');
      expect(file, code).toMatch(/^docs\/.+\.md$/);
      const section = sections(file!).get(anchor!);
      if (section === undefined) problems.push(`${code}: ${entry.docs} names no heading`);
      else if (!section.includes(`\`${code}\``)) problems.push(`${code}: not listed under ${entry.docs}`);
    }
    expect(problems).toEqual([]);
  });

  it('the OpenAPI description lists every code with its status and title', () => {
    const document = buildOpenApi([], { title: 't', version: 'v1', serverUrl: 'http://127.0.0.1' }) as {
      components: {
        schemas: { Problem: { properties: { code: { enum: string[] } } } };
        'x-error-codes': { code: string; status: number; title: string }[];
      };
    };
    const codes = Object.keys(ERROR_CODES);
    expect(document.components.schemas.Problem.properties.code.enum).toEqual(codes);
    expect(document.components['x-error-codes'].map(({ code, status, title }) => ({ code, status, title }))).toEqual(
      Object.entries(ERROR_CODES).map(([code, { status, title }]) => ({ code, status, title })),
    );
  });
});
