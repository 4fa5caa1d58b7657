import { describe, expect, it } from 'vitest';
import { DomainError } from '@aileron/errors';
import { createdAtKey, ListCursor, numberKey, pageQuery, textKey } from './pagination';

const at = new Date('2026-01-02T03:04:05.678Z');

function refusal(run: () => unknown): DomainError {
  try {
    run();
  } catch (error) {
    return error as DomainError;
  }
  throw new Error('expected a refusal');
}

describe('ListCursor', () => {
  it('gives back the key it was made from', () => {
    const cursor = new ListCursor('approvals', createdAtKey);
    expect(cursor.decode(cursor.encode({ createdAt: at, id: 'a1' }))).toEqual({ createdAt: at, id: 'a1' });
    expect(new ListCursor('secrets', textKey).decode(new ListCursor('secrets', textKey).encode('github/token'))).toBe(
      'github/token',
    );
    expect(new ListCursor('versions', numberKey).decode(new ListCursor('versions', numberKey).encode(42))).toBe(42);
  });

  it("refuses another list's cursor, a mangled one and one of another shape with INVALID_CURSOR", () => {
    const approvals = new ListCursor('approvals', createdAtKey);
    const webhooks = new ListCursor('webhooks', createdAtKey);
    const foreign = webhooks.encode({ createdAt: at, id: 'w1' });
    for (const bad of [
      foreign,
      'not a cursor',
      '',
      Buffer.from('{"v":1,"l":"approvals","k":["yesterday","x"]}').toString('base64url'),
      Buffer.from('{"v":2,"l":"approvals","k":[]}').toString('base64url'),
    ]) {
      const error = refusal(() => approvals.decode(bad));
      expect(error.code).toBe('INVALID_CURSOR');
      expect(error.status).toBe(400);
      expect(error.extensions.errors).toEqual([{ path: 'query.cursor', message: expect.any(String) }]);
    }
  });

  it('reads the format a list gave out before, when it names one', () => {
    const cursor = new ListCursor('audit', numberKey, (text) =>
      /^s:(\d+)$/.test(text) ? Number(text.slice(2)) : undefined,
    );
    expect(cursor.decode(Buffer.from('s:17').toString('base64url'))).toBe(17);
  });

  it('pages rows read one past the page: a cursor while more follow, null on the last page', () => {
    const cursor = new ListCursor('numbers', numberKey);
    const query = pageQuery().parse({ limit: '2' });
    expect(cursor.keyset(query)).toEqual({ take: 3 });
    const first = cursor.page(
      [5, 4, 3],
      query,
      (n) => n,
      (n) => ({ n }),
    );
    expect(first.items).toEqual([{ n: 5 }, { n: 4 }]);
    expect(cursor.keyset({ ...query, cursor: first.next_cursor! })).toEqual({ after: 4, take: 3 });
    expect(
      cursor.page(
        [3, 2],
        query,
        (n) => n,
        (n) => n,
      ),
    ).toEqual({ items: [3, 2], next_cursor: null });
  });

  it('pages a list held in memory by the same keys', () => {
    const cursor = new ListCursor('names', textKey);
    const rows = ['a', 'b', 'c', 'd', 'e'];
    const seen: string[] = [];
    let next: string | undefined;
    do {
      const page = cursor.pageInMemory(
        rows,
        pageQuery().parse({ limit: 2, ...(next ? { cursor: next } : {}) }),
        (r) => r,
        (a, b) => a.localeCompare(b),
        (r) => r,
      );
      seen.push(...page.items);
      next = page.next_cursor ?? undefined;
    } while (next);
    expect(seen).toEqual(rows);
  });
});

describe('pageQuery', () => {
  it('defaults to 50 and refuses more than the maximum', () => {
    expect(pageQuery().parse({})).toEqual({ limit: 50 });
    expect(pageQuery().safeParse({ limit: '201' }).success).toBe(false);
    expect(pageQuery({ max: 500 }).parse({ limit: '500' }).limit).toBe(500);
  });
});
