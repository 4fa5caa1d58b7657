import { z } from 'zod';
import type { Keyset } from '@aileron/database';
import { DomainError } from '@aileron/errors';

/**
 * One way to page every list (API.md): `?limit=&cursor=` in, `{items,
 * next_cursor}` out, `next_cursor` null on the last page. The cursor is
 * opaque to clients: base64url of a versioned JSON naming the list and the
 * key of the last row given, which the repository turns into a keyset
 * condition (`@aileron/database` keysetAfter). docs/rules/pagination.md says why.
 */
export const PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;
/** The release that stops answering the deprecated list fields and parameters (docs/api-changelog.md). */
export const LEGACY_REMOVAL = '0.3.0';

/** Our cursors are well under this; a longer one is not ours and is not worth decoding. */
const MAX_CURSOR_LENGTH = 512;
const CURSOR_VERSION = 1;

/**
 * `limit` and `cursor`; `max` above MAX_PAGE_SIZE only for a list whose
 * clients asked for more before pages had one size (docs/api-changelog.md).
 */
export function pageQuery(options: { max?: number } = {}) {
  const max = options.max ?? MAX_PAGE_SIZE;
  return z.object({
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(max)
      .default(PAGE_SIZE)
      .describe(`items per page, 1 to ${max}; default ${PAGE_SIZE}`),
    cursor: z
      .string()
      .max(MAX_CURSOR_LENGTH)
      .optional()
      .describe('the `next_cursor` of the previous page, as given (opaque)'),
  });
}

export type PageQuery = z.infer<ReturnType<typeof pageQuery>>;

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

const nextCursor = z.string().nullable().describe('pass as `cursor` for the next page; null on the last page');

/** The answer of a list: `{items, next_cursor}`. */
export function pageView<T extends z.ZodType>(item: T) {
  return z.object({ items: z.array(item), next_cursor: nextCursor });
}

/**
 * The answer of a list that used to name its items otherwise (`{workspaces:
 * […]}`): the old name carries the same items until LEGACY_REMOVAL, so
 * clients of the last release keep working while they move to `items`.
 */
export function legacyPageView<T extends z.ZodType, L extends string>(item: T, legacy: L) {
  const items = z.array(item);
  const old = z
    .array(item)
    .meta({ deprecated: true })
    .describe(`the same as \`items\`; deprecated, removed in ${LEGACY_REMOVAL}`);
  return z.object({ items, next_cursor: nextCursor, [legacy]: old }) as unknown as z.ZodObject<
    { items: z.ZodArray<T>; next_cursor: typeof nextCursor } & { [K in L]: z.ZodArray<T> }
  >;
}

export function withLegacyKey<T, L extends string>(page: Page<T>, legacy: L): Page<T> & { [K in L]: T[] } {
  return { ...page, [legacy]: page.items } as Page<T> & { [K in L]: T[] };
}

/** How a list's key travels inside its cursor: JSON strings and numbers only. */
export interface CursorKey<K> {
  toParts(key: K): (string | number)[];
  /** undefined when the parts are not a key of this shape */
  fromParts(parts: unknown[]): K | undefined;
}

const ISO_MILLIS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** created_at, then the id: the order of most lists, stable under equal timestamps. */
export const createdAtKey: CursorKey<{ createdAt: Date; id: string }> = {
  toParts: (key) => [key.createdAt.toISOString(), key.id],
  fromParts: (parts) => {
    const [at, id] = parts;
    if (
      parts.length !== 2 ||
      typeof at !== 'string' ||
      !ISO_MILLIS.test(at) ||
      typeof id !== 'string' ||
      id.length === 0 ||
      id.length > 200
    )
      return undefined;
    const createdAt = new Date(at);
    return Number.isNaN(createdAt.getTime()) ? undefined : { createdAt, id };
  },
};

/** A unique text of the row (a slug, a name, a path). */
export const textKey: CursorKey<string> = {
  toParts: (key) => [key],
  fromParts: (parts) =>
    parts.length === 1 && typeof parts[0] === 'string' && parts[0].length <= 1024 ? parts[0] : undefined,
};

/** Two texts unique together (a version and a tool, a server and an instance), compared in that order. */
export const textPairKey: CursorKey<readonly [string, string]> = {
  toParts: (key) => [key[0], key[1]],
  fromParts: (parts) =>
    parts.length === 2 && parts.every((part) => typeof part === 'string' && part.length <= 1024)
      ? [parts[0] as string, parts[1] as string]
      : undefined,
};

/** The order of textPairKey in memory: by the first text, then the second (code units, as a sort without a collation). */
export function compareTextPairs(a: readonly [string, string], b: readonly [string, string]): number {
  return compareText(a[0], b[0]) || compareText(a[1], b[1]);
}

/** Strings by code units, the order of `<` (a sort without a collation). */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A unique whole number of the row (a version, a position in a chain). */
export const numberKey: CursorKey<number> = {
  toParts: (key) => [key],
  fromParts: (parts) => (parts.length === 1 && Number.isSafeInteger(parts[0]) ? (parts[0] as number) : undefined),
};

/** A cursor that does not decode, or that another list gave out. */
export class InvalidCursorError extends DomainError {
  constructor() {
    super('INVALID_CURSOR', 'query.cursor: is not a next_cursor this list gave out; start again without a cursor', {
      extensions: { errors: [{ path: 'query.cursor', message: 'is not a next_cursor this list gave out' }] },
    });
  }
}

/**
 * The cursors of one list. `list` names it inside every cursor, so one list's
 * cursor given to another is refused rather than read as a key it is not.
 * `legacy` reads the cursors a list gave out before this format, until
 * LEGACY_REMOVAL.
 */
export class ListCursor<K> {
  constructor(
    readonly list: string,
    private readonly key: CursorKey<K>,
    private readonly legacy?: (text: string) => K | undefined,
  ) {}

  encode(key: K): string {
    return Buffer.from(JSON.stringify({ v: CURSOR_VERSION, l: this.list, k: this.key.toParts(key) })).toString(
      'base64url',
    );
  }

  decode(cursor: string): K {
    const text = /^[A-Za-z0-9_-]*$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
    const key = this.read(text) ?? this.legacy?.(text);
    if (key === undefined) throw new InvalidCursorError();
    return key;
  }

  /**
   * What the repository reads for a page: the rows after the cursor's key, one
   * more than the page. `legacyAfter` is the key a deprecated parameter names
   * (`before=`, `after=`), used when no cursor is given.
   */
  keyset(query: PageQuery, legacyAfter?: K): Keyset<K> {
    const after = query.cursor !== undefined ? this.decode(query.cursor) : legacyAfter;
    return { ...(after !== undefined ? { after } : {}), take: query.limit + 1 };
  }

  /** The page out of rows read with `keyset(query)`: the extra row, if it came, says another page follows. */
  page<R, V>(rows: readonly R[], query: PageQuery, keyOf: (row: R) => K, view: (row: R) => V): Page<V> {
    const shown = rows.slice(0, query.limit);
    const last = shown[shown.length - 1];
    return {
      items: shown.map(view),
      next_cursor: rows.length > query.limit && last !== undefined ? this.encode(keyOf(last)) : null,
    };
  }

  /**
   * A page of a list held in memory (a cache, this replica's instances),
   * `rows` in the list's order and `compare` that order on keys: the same
   * keyset as a query, without a database.
   */
  pageInMemory<R, V>(
    rows: readonly R[],
    query: PageQuery,
    keyOf: (row: R) => K,
    compare: (a: K, b: K) => number,
    view: (row: R) => V,
  ): Page<V> {
    const { after, take } = this.keyset(query);
    const from = after === undefined ? rows : rows.filter((row) => compare(keyOf(row), after) > 0);
    return this.page(from.slice(0, take), query, keyOf, view);
  }

  private read(text: string): K | undefined {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return undefined;
    }
    const body = parsed as { v?: unknown; l?: unknown; k?: unknown } | null;
    if (
      typeof body !== 'object' ||
      body === null ||
      body.v !== CURSOR_VERSION ||
      body.l !== this.list ||
      !Array.isArray(body.k)
    )
      return undefined;
    return this.key.fromParts(body.k);
  }
}
