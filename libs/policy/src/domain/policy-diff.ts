import type { PolicyDocument, PolicyRule } from './policy-document';

export interface PolicyDiff {
  settings: { field: 'default' | 'on_error'; before: unknown; after: unknown }[];
  added: PolicyRule[];
  removed: PolicyRule[];
  changed: { id: string; before: PolicyRule; after: PolicyRule }[];
}

/**
 * What changed between two versions, rule by rule (matched by id). A setting
 * that is absent shows as null, so the answer survives JSON. A rule counts as
 * changed when its canonical JSON differs: key order is noise, list order is not.
 */
export function diffPolicies(before: PolicyDocument, after: PolicyDocument): PolicyDiff {
  const settings: PolicyDiff['settings'] = [];
  for (const field of ['default', 'on_error'] as const) {
    const was = before[field] ?? null;
    const is = after[field] ?? null;
    if (was !== is) settings.push({ field, before: was, after: is });
  }
  const old = byId(before.rules);
  const now = byId(after.rules);
  const added: PolicyRule[] = [];
  const removed: PolicyRule[] = [];
  const changed: PolicyDiff['changed'] = [];
  for (const [id, rule] of now) {
    const previous = old.get(id);
    if (previous === undefined) added.push(rule);
    else if (canonicalJson(previous) !== canonicalJson(rule)) changed.push({ id, before: previous, after: rule });
  }
  for (const [id, rule] of old) if (!now.has(id)) removed.push(rule);
  const order = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  return { settings, added: added.sort(order), removed: removed.sort(order), changed: changed.sort(order) };
}

/** Validated documents have unique ids; should one not, its first rule with an id stands for it. */
function byId(rules: PolicyRule[]): Map<string, PolicyRule> {
  const map = new Map<string, PolicyRule>();
  for (const rule of rules) if (!map.has(rule.id)) map.set(rule.id, rule);
  return map;
}

/** JSON with object keys sorted and undefined members left out, as JSON.stringify leaves them. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value))
    return `[${value.map((item) => (item === undefined ? 'null' : canonicalJson(item))).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>;
    const members = Object.keys(record)
      .filter((key) => record[key] !== undefined)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalJson(record[key])}`);
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
