// Lists of names that a decision looks values up in. The per-call helpers of
// the engine are loops rather than .some(callback): a decision sits on every
// tool call's path, and closures over the call would allocate.

/** Up to this many names, comparing with === beats hashing the name. */
export const SCAN_LIMIT = 8;

export type Members = readonly unknown[] | Set<unknown>;

export function members(values: readonly unknown[] | undefined): Members | null {
  if (values === undefined) return null;
  // === agrees with a Set's SameValueZero whenever one side is a string
  if (Array.isArray(values) && values.length <= SCAN_LIMIT && values.every((value) => typeof value === 'string'))
    return [...values];
  return new Set(values);
}

export function isMember(members: Members, value: unknown): boolean {
  if (!Array.isArray(members)) return (members as Set<unknown>).has(value);
  for (let i = 0; i < members.length; i++) if (members[i] === value) return true;
  return false;
}
