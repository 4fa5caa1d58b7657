/**
 * Text as PostgreSQL can hold it: it refuses NUL in `text` and `jsonb`
 * (failing the statement, and with it a whole batch), and a lone UTF-16
 * surrogate in `jsonb` (in `text` it becomes U+FFFD). Both become U+FFFD
 * here, so what is hashed or compared before storing is what is stored.
 */
export function storableText(text: string): string {
  if (text.isWellFormed() && !text.includes('\u0000')) return text;
  return text.toWellFormed().replaceAll('\u0000', '\uFFFD');
}

/**
 * A JSON value as `jsonb` can hold it (`storableText` for every string, keys
 * included). The same value, not a copy, when nothing needs to change, as
 * nearly always.
 */
export function storableJson<T>(value: T): T {
  if (typeof value === 'string') return storableText(value) as T;
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    const items = value.map(storableJson);
    return (items.some((item, i) => item !== value[i]) ? items : value) as T;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype && Object.getPrototypeOf(value) !== null) return value;
  let changed = false;
  const entries = Object.entries(value).map(([key, item]) => {
    const storedKey = storableText(key);
    const stored = storableJson(item);
    if (storedKey !== key || stored !== item) changed = true;
    return [storedKey, stored] as const;
  });
  // fromEntries defines own properties: a `__proto__` key stays a key
  return (changed ? Object.fromEntries(entries) : value) as T;
}
