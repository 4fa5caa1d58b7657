import type { CompiledPolicy } from './policy-decision';
import type { DefaultEffect, PolicyDocument } from './policy-document';
import { PolicyIndex } from './policy-index';

// The engine's public face. Its parts, from the call inwards: policy-index.ts
// (which rules concern a server and tool, and the plan that decides their
// calls), compiled-rule.ts (a rule's scope and condition), principal-table.ts
// (every rule's principal match answered in one look at the caller) and
// argument-test.ts (conditions on arguments). reference-evaluator.ts says
// what all of it must decide.

export type { CallPrincipal, CompiledPolicy, PolicyCall, PolicyDecision } from './policy-decision';
export { DECISION_MEMO_LIMIT } from './policy-index';

/**
 * Compiles a document once into an index, so that a decision looks only at the
 * rules that can concern the call's server and tool. Never throws, even for a
 * document that never went through validation: what cannot be compiled (a bad regex)
 * becomes an evaluation error of the rule for every call that reaches it.
 */
export function compilePolicy(document: PolicyDocument, options: { defaultEffect: DefaultEffect }): CompiledPolicy {
  return new PolicyIndex(document, options.defaultEffect);
}
