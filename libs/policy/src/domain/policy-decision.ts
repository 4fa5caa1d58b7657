import type { DefaultEffect, Effect, ExecutionMode, OnError } from './policy-document';

// What the engine is asked and what it answers; the engine (policy-engine.ts)
// and its specification (reference-evaluator.ts) speak the same words.

export interface CallPrincipal {
  user?: string;
  roles?: string[];
  groups?: string[];
  gateway?: string;
  session?: string;
}

export interface PolicyCall {
  server: string;
  tool: string;
  /**
   * the catalog `tool_prefix` of the call's server, when it has one: rules
   * may name the tool as `<tool_prefix>__<tool>` (as well as `<server>__<tool>`)
   */
  tool_prefix?: string;
  arguments?: Record<string, unknown>;
  principal?: CallPrincipal;
  execution_mode?: ExecutionMode;
}

/**
 * Deep-frozen, and possibly the very object an earlier call got: decisions are
 * remembered per (server, tool), so a caller that wants to add fields copies it.
 */
export interface PolicyDecision {
  decision: Effect;
  reason: 'rule' | 'default' | 'evaluation_error';
  /** ids of the deciding rules, sorted */
  rules: string[];
  approval_route: string | null;
  /** every rule that could not be evaluated for this call, sorted by id */
  errors: { rule: string; message: string }[];
}

export interface CompiledPolicy {
  readonly defaultEffect: DefaultEffect;
  readonly onError: OnError;
  readonly ruleCount: number;
  evaluate(call: PolicyCall): PolicyDecision;
  /**
   * For tools/list: false when `evaluate` would deny every call of this tool,
   * whatever its arguments, so a tool that is always denied is never offered.
   * Sound by construction: a call `evaluate` lets through (or sends to
   * approval) is always on a listed tool.
   */
  listable(call: Omit<PolicyCall, 'arguments'>): boolean;
}
