/**
 * Keyset pagination: a page is "the rows after this key, in this order", never
 * an OFFSET. The key is the row's position in a total order (its natural
 * unique key, or created_at with the id as tie-breaker), so a row written
 * while a client pages shifts nothing and two rows with the same created_at
 * are neither skipped nor repeated.
 */
export interface Keyset<K> {
  /** the key of the last row of the previous page; none on the first page */
  after?: K;
  /** how many rows to read: one more than the page, so the page knows whether another follows */
  take: number;
}

export type KeysetDirection = 'asc' | 'desc';

/**
 * The `where` for the rows after `values` in the order of `fields` (all one
 * direction): `(f1, f2) < (v1, v2)` spelled the way Prisma can index,
 * `f1 < v1 OR (f1 = v1 AND f2 < v2)`. Empty on the first page.
 */
export function keysetAfter<W>(
  fields: readonly string[],
  direction: KeysetDirection,
  values: readonly unknown[] | undefined,
): W {
  if (values === undefined) return {} as W;
  if (values.length !== fields.length)
    throw new Error(`a keyset over ${fields.length} fields needs ${fields.length} values`);
  const op = direction === 'asc' ? 'gt' : 'lt';
  const branches = fields.map((field, i) => {
    const equal = Object.fromEntries(fields.slice(0, i).map((f, j) => [f, values[j]]));
    return { ...equal, [field]: { [op]: values[i] } };
  });
  return (branches.length === 1 ? branches[0] : { OR: branches }) as W;
}

/** The `orderBy` that goes with keysetAfter. */
export function keysetOrder<O>(fields: readonly string[], direction: KeysetDirection): O[] {
  return fields.map((field) => ({ [field]: direction }) as O);
}
