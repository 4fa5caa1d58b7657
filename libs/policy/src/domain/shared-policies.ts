import type { CompiledPolicy } from './policy-decision';
import type { DefaultEffect, PolicyDocument } from './policy-document';
import { compilePolicy } from './policy-engine';

/** A document and its compiled index, as every workspace enforcing that document holds them. */
export interface SharedPolicy {
  readonly document: PolicyDocument;
  readonly compiled: CompiledPolicy;
}

/**
 * One compiled policy for every workspace whose document (by digest) and
 * default are the same. An installation that provisions its tenants from a
 * template holds thousands of identical documents, and a compiled index costs
 * about 20 KB of heap: compiled once per workspace, 10,000 workspaces held
 * 200 MB for a handful of distinct policies (bench/tenants.bench.ts). Sharing
 * is safe because a decision depends only on the document and the call; the
 * index's decision memo is bounded whoever fills it.
 *
 * Held weakly: an entry no workspace's cache still holds is collected with its
 * policy, so this never keeps what the caches have let go.
 */
export class SharedPolicies {
  private readonly byKey = new Map<string, WeakRef<SharedPolicy>>();
  private readonly collected = new FinalizationRegistry<string>((key) => {
    // the key may have been taken by a newer entry since: only a dead one goes
    if (this.byKey.get(key)?.deref() === undefined) this.byKey.delete(key);
  });

  /** The shared entry for `digest` (of `document`) under `defaultEffect`, compiled on first use. */
  of(digest: string, document: PolicyDocument, defaultEffect: DefaultEffect): SharedPolicy {
    const key = `${defaultEffect}:${digest}`;
    const known = this.byKey.get(key)?.deref();
    if (known) return known;
    const entry: SharedPolicy = { document, compiled: compilePolicy(document, { defaultEffect }) };
    this.byKey.set(key, new WeakRef(entry));
    this.collected.register(entry, key);
    return entry;
  }

  /** How many distinct policies are held (for tests and metrics). */
  get size(): number {
    return this.byKey.size;
  }
}
