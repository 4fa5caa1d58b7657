import type { ArgumentCondition } from './policy-document';
import { isMember, type Members, SCAN_LIMIT } from './members';
import { compilePattern, type Pattern } from './pattern';

// A rule's conditions on the call's arguments. Each is three-valued: it holds,
// it does not, or it cannot be evaluated (a missing path, a value of the wrong
// type), and the message says which condition and why.

/** A condition's outcome: true, false, or the message of why it cannot be evaluated. */
export type Outcome = boolean | string;

/**
 * One argument condition, as data for `testArgument` rather than a chain of
 * closures: a call then reads a couple of objects, not one per operator.
 */
export interface ArgumentTest {
  readonly segments: readonly string[];
  /** the path, when it is a single segment: one object fewer to fetch in the common case */
  readonly key: string | null;
  /** the operators present, as the bits below */
  readonly operators: number;
  readonly equals: unknown;
  readonly equalsScalar: boolean;
  readonly inScalars: Members;
  readonly inStructured: readonly unknown[];
  readonly regex: Pattern | null;
  readonly gt: number | undefined;
  readonly gte: number | undefined;
  readonly lt: number | undefined;
  readonly lte: number | undefined;
  readonly exists: unknown;
  readonly missing: string;
  readonly notString: string;
  readonly notNumber: string;
  /** why the regex does not compile, or why a condition without operators cannot say anything */
  readonly broken: string;
}

// The operators, in the order a condition with several of them (only an
// unvalidated document has such) tries them.
const EQUALS = 1;
const IN = 2;
const REGEX = 4;
const RANGE = 8;
const EXISTS = 16;

const MISSING: unique symbol = Symbol('missing');

/**
 * Three-valued AND: a false condition means the rule does not apply, whatever
 * else errs; otherwise the first error in document order names the failure.
 */
export function testAll(tests: readonly ArgumentTest[], args: unknown): Outcome {
  if (tests.length === 1) return testArgument(tests[0]!, args);
  let error: string | null = null;
  for (let i = 0; i < tests.length; i++) {
    const outcome = testArgument(tests[i]!, args);
    if (outcome === false) return false;
    if (outcome !== true) error ??= outcome;
  }
  return error ?? true;
}

export function compileTest(condition: ArgumentCondition, index: number): ArgumentTest {
  const label = `arguments[${index}] (path "${condition.path}")`;
  let operators = 0;
  let regex: Pattern | null = null;
  let broken = `${label}: the condition has no operator`;
  if (condition.regex !== undefined) {
    try {
      regex = compilePattern(condition.regex);
    } catch (error) {
      broken = `${label}: the regex does not compile: ${(error as Error).message}`;
    }
  }
  const list = condition.in === undefined ? [] : Array.isArray(condition.in) ? condition.in : [];
  const scalars = list.filter(isScalar);
  const { gt, gte, lt, lte } = condition.range === undefined ? {} : condition.range;
  if (condition.equals !== undefined) operators |= EQUALS;
  if (condition.in !== undefined) operators |= IN;
  if (condition.regex !== undefined) operators |= REGEX;
  if (condition.range !== undefined) operators |= RANGE;
  if (condition.exists !== undefined) operators |= EXISTS;
  const segments = String(condition.path).split('.');
  // in the order testArgument reads them (see compileCondition)
  return {
    operators,
    key: segments.length === 1 ? segments[0]! : null,
    equalsScalar: isScalar(condition.equals),
    equals: condition.equals,
    // NaN is no scalar here, so === and the Set's SameValueZero agree on scalars; a copy of exactly its length, its storage allocated with it
    inScalars: scalars.length <= SCAN_LIMIT ? scalars.slice() : new Set(scalars),
    regex,
    gt,
    gte,
    lt,
    lte,
    exists: condition.exists,
    missing: `${label}: the path is missing`,
    notString: `${label}: the value is not a string`,
    notNumber: `${label}: the value is not a finite number`,
    inStructured: list.filter((option) => !isScalar(option)),
    segments,
    broken,
  };
}

/** One argument condition; several operators (only unvalidated) must all hold, with the same three-valued AND as testAll. */
export function testArgument(test: ArgumentTest, args: unknown): Outcome {
  const operators = test.operators;
  // a condition that says nothing cannot grant
  if (operators === 0) return test.broken;
  const value = test.key !== null ? step(args, test.key) : resolve(args, test.segments);
  const missing = value === MISSING;
  let error: string | null = null;
  if ((operators & EQUALS) !== 0) {
    if (missing) error ??= test.missing;
    else if (!(test.equalsScalar ? value === test.equals : jsonEqual(value, test.equals))) return false;
  }
  if ((operators & IN) !== 0) {
    if (missing) error ??= test.missing;
    else if (!(isScalar(value) ? isMember(test.inScalars, value) : anyEqual(test.inStructured, value))) return false;
  }
  if ((operators & REGEX) !== 0) {
    if (missing) error ??= test.missing;
    else if (typeof value !== 'string') error ??= test.notString;
    else if (test.regex === null) error ??= test.broken;
    else if (!test.regex.test(value)) return false;
  }
  if ((operators & RANGE) !== 0) {
    if (missing) error ??= test.missing;
    else if (typeof value !== 'number' || !Number.isFinite(value)) error ??= test.notNumber;
    else if (!inRange(test, value)) return false;
  }
  if ((operators & EXISTS) !== 0 && !missing !== test.exists) return false;
  return error ?? true;
}

function inRange(test: ArgumentTest, value: number): boolean {
  const { gt, gte, lt, lte } = test;
  return (
    (gt === undefined || value > gt) &&
    (gte === undefined || value >= gte) &&
    (lt === undefined || value < lt) &&
    (lte === undefined || value <= lte)
  );
}

function anyEqual(options: readonly unknown[], value: unknown): boolean {
  for (let i = 0; i < options.length; i++) if (jsonEqual(value, options[i])) return true;
  return false;
}

const INDEX = /^(?:0|[1-9][0-9]*)$/;

function resolve(args: unknown, segments: readonly string[]): unknown {
  let value = args;
  for (let i = 0; i < segments.length && value !== MISSING; i++) value = step(value, segments[i]!);
  return value;
}

function step(value: unknown, segment: string): unknown {
  if (typeof value !== 'object' || value === null) return MISSING;
  if (Array.isArray(value)) {
    if (!INDEX.test(segment)) return MISSING;
    const position = Number(segment);
    return position < value.length ? value[position] : MISSING;
  }
  return Object.prototype.hasOwnProperty.call(value, segment) ? (value as Record<string, unknown>)[segment] : MISSING;
}

/** Strings, finite-or-not numbers, booleans and null compare by ===; NaN equals nothing. */
function isScalar(value: unknown): value is string | number | boolean | null {
  return value === null || (typeof value !== 'object' && !Number.isNaN(value));
}

/** JSON equality: key order ignored, arrays ordered, null equals only null. */
function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const key of keys) {
    if (!Object.prototype.hasOwnProperty.call(b, key)) return false;
    if (!jsonEqual((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])) return false;
  }
  return true;
}
