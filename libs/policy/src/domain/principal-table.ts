import type { CallPrincipal } from './policy-decision';
import type { PrincipalMatch } from './policy-document';
import { isMember, members, type Members, SCAN_LIMIT } from './members';

// Who a rule is for (users, roles, groups, gateways, sessions: any one listed
// suffices), compiled twice: each rule's own match, which can answer any
// principal, and the PrincipalTable, which answers for all rules at once.

export const PRINCIPAL_FIELDS = ['users', 'roles', 'groups', 'gateways', 'sessions'] as const;
export type PrincipalField = (typeof PRINCIPAL_FIELDS)[number];
export type Who = Readonly<Record<PrincipalField, readonly unknown[] | undefined>>;
// a field's bit, in a condition's `fields` and in what PrincipalTable.match reads
const USERS = 1;
const ROLES = 2;
const GROUPS = 4;
const GATEWAYS = 8;
const SESSIONS = 16;
export const FIELD_BITS: Readonly<Record<PrincipalField, number>> = {
  users: USERS,
  roles: ROLES,
  groups: GROUPS,
  gateways: GATEWAYS,
  sessions: SESSIONS,
};
/** The match of a condition that names no principal: every principal holds it. */
export const ANYONE: Who = Object.freeze({
  users: undefined,
  roles: undefined,
  groups: undefined,
  gateways: undefined,
  sessions: undefined,
});

/** From a name to the bits of the conditions that list it, for a field with too many names to compare one by one. */
type Hashed = Map<unknown, number>;

/** The names `field` lists in the principal matches of `mask`, each once, with the bits of those that list it. */
function namesOf(whos: readonly Who[], mask: number, field: PrincipalField): Map<unknown, number> {
  const byValue = new Map<unknown, number>();
  for (let i = 0; i < whos.length; i++) {
    const bit = 1 << i;
    const values = (mask & bit) === 0 ? undefined : whos[i]![field];
    if (values === undefined) continue;
    for (const value of values) byValue.set(value, (byValue.get(value) ?? 0) | bit);
  }
  return byValue;
}

/** What PrincipalTable.match returns when only the rules' own matches can say, exactly, what happens. */
export const UNUSUAL = -1;

/**
 * Principal matches merged field by field: a field that several of them name
 * is read once. A (server, tool) pair asks a table narrowed to the matches
 * of its own rules, so that a principal is held against the few names those
 * list, not against every name of the policy.
 *
 * The names of a field, when they are few strings, sit with their bits in
 * one flat list shared by all five fields and are compared with === (which
 * agrees with a Map's SameValueZero when one side is a string): a decision
 * then reads the table and one list, not an object, a map and its storage
 * per field, which is what a cold cache pays for after other work ran.
 * Other fields are hashed.
 */
export class PrincipalTable {
  /** `[name, bits, …]` of the scanned fields, groups, roles, users, gateways, sessions in that order */
  private readonly flat: readonly unknown[];
  // where each field's part of `flat` ends (it starts where the previous one's does)
  private readonly groupsEnd: number;
  private readonly rolesEnd: number;
  private readonly usersEnd: number;
  private readonly gatewaysEnd: number;
  private readonly sessionsEnd: number;
  /** a field's names, when it is hashed rather than scanned; null for every field scanned */
  private readonly hashed: Readonly<Record<PrincipalField, Hashed | null>> | null;

  /**
   * `whos[i]` is the match with the bit 1 << i; `wide` the table this one
   * narrows. A field hashed here (more names than SCAN_LIMIT, or names that
   * are not strings) is hashed in `wide` too, whose map (with extra bits no
   * caller looks at) answers as fast, and is shared rather than kept twice.
   */
  constructor(
    private readonly whos: readonly Who[],
    mask: number,
    wide: PrincipalTable | null,
  ) {
    const flat: unknown[] = [];
    const ends: number[] = [];
    const hashed: Record<PrincipalField, Hashed | null> = {
      users: null,
      roles: null,
      groups: null,
      gateways: null,
      sessions: null,
    };
    let anyHashed = false;
    for (const field of SCANNED_ORDER) {
      const names = namesOf(whos, mask, field);
      const scan = names.size <= SCAN_LIMIT && [...names.keys()].every((name) => typeof name === 'string');
      if (scan) {
        for (const [name, bits] of names) flat.push(name, bits);
      } else {
        hashed[field] = wide?.hashed?.[field] ?? names;
        anyHashed = true;
      }
      ends.push(flat.length);
    }
    // a copy of exactly its length, its storage allocated with it
    this.flat = flat.slice();
    [this.groupsEnd, this.rolesEnd, this.usersEnd, this.gatewaysEnd, this.sessionsEnd] = ends as [
      number,
      number,
      number,
      number,
      number,
    ];
    this.hashed = anyHashed ? hashed : null;
  }

  /** The same answers for the matches of `mask`; any other bits may be wrong. */
  narrow(mask: number): PrincipalTable {
    return new PrincipalTable(this.whos, mask, this);
  }

  /**
   * The bits of the conditions whose principal match the principal passes,
   * reading only `fields`; or UNUSUAL. Each field has a loop of its own, not
   * a shared helper: each comparison then learns the kind of string its
   * field holds (role and group names are mostly interned, and compare as
   * pointers), rather than the slowest kind any field holds.
   */
  match(principal: CallPrincipal | undefined, fields: number): number {
    if (principal == null) return 0;
    return this.hashed === null ? this.scan(principal, fields) : this.matchHashed(principal, fields, this.hashed);
  }

  /** `match` when every field is scanned: the common case, with nothing else to ask per field. */
  private scan(principal: CallPrincipal, fields: number): number {
    const flat = this.flat;
    let bits = 0;
    // anything but a list (a string, say) is iterated as it always was, by the rules themselves
    if ((fields & GROUPS) !== 0) {
      const groups: unknown = principal.groups;
      if (groups !== undefined) {
        if (!Array.isArray(groups)) return UNUSUAL;
        const end = this.groupsEnd;
        for (let h = 0; h < groups.length; h++) {
          const value: unknown = groups[h];
          for (let i = 0; i < end; i += 2) {
            if (flat[i] === value) {
              bits |= flat[i + 1] as number;
              break;
            }
          }
        }
      }
    }
    if ((fields & ROLES) !== 0) {
      const roles: unknown = principal.roles;
      if (roles !== undefined) {
        if (!Array.isArray(roles)) return UNUSUAL;
        const end = this.rolesEnd;
        for (let h = 0; h < roles.length; h++) {
          const value: unknown = roles[h];
          for (let i = this.groupsEnd; i < end; i += 2) {
            if (flat[i] === value) {
              bits |= flat[i + 1] as number;
              break;
            }
          }
        }
      }
    }
    if ((fields & USERS) !== 0) {
      const user = principal.user;
      if (user !== undefined) {
        const end = this.usersEnd;
        for (let i = this.rolesEnd; i < end; i += 2) {
          if (flat[i] === user) {
            bits |= flat[i + 1] as number;
            break;
          }
        }
      }
    }
    if ((fields & GATEWAYS) !== 0 && principal.gateway !== undefined)
      bits |= scanOne(flat, this.usersEnd, this.gatewaysEnd, principal.gateway);
    if ((fields & SESSIONS) !== 0 && principal.session !== undefined)
      bits |= scanOne(flat, this.gatewaysEnd, this.sessionsEnd, principal.session);
    return bits;
  }

  /** `match` when some field has too many names to scan. */
  private matchHashed(
    principal: CallPrincipal,
    fields: number,
    hashed: Readonly<Record<PrincipalField, Hashed | null>>,
  ): number {
    const flat = this.flat;
    let bits = 0;
    if ((fields & GROUPS) !== 0) {
      const groups: unknown = principal.groups;
      if (groups !== undefined) {
        if (!Array.isArray(groups)) return UNUSUAL;
        bits |= hashed.groups !== null ? hashAny(hashed.groups, groups) : scanAny(flat, 0, this.groupsEnd, groups);
      }
    }
    if ((fields & ROLES) !== 0) {
      const roles: unknown = principal.roles;
      if (roles !== undefined) {
        if (!Array.isArray(roles)) return UNUSUAL;
        bits |=
          hashed.roles !== null ? hashAny(hashed.roles, roles) : scanAny(flat, this.groupsEnd, this.rolesEnd, roles);
      }
    }
    if ((fields & USERS) !== 0 && principal.user !== undefined) {
      bits |=
        hashed.users !== null
          ? (hashed.users.get(principal.user) ?? 0)
          : scanOne(flat, this.rolesEnd, this.usersEnd, principal.user);
    }
    if ((fields & GATEWAYS) !== 0 && principal.gateway !== undefined) {
      bits |=
        hashed.gateways !== null
          ? (hashed.gateways.get(principal.gateway) ?? 0)
          : scanOne(flat, this.usersEnd, this.gatewaysEnd, principal.gateway);
    }
    if ((fields & SESSIONS) !== 0 && principal.session !== undefined) {
      bits |=
        hashed.sessions !== null
          ? (hashed.sessions.get(principal.session) ?? 0)
          : scanOne(flat, this.gatewaysEnd, this.sessionsEnd, principal.session);
    }
    return bits;
  }
}

/** The fields in the order of PrincipalTable's flat list. */
const SCANNED_ORDER: readonly PrincipalField[] = ['groups', 'roles', 'users', 'gateways', 'sessions'];

/** The bits of `value` among the names of `flat` from `from` to `to`, each listed once. */
function scanOne(flat: readonly unknown[], from: number, to: number, value: unknown): number {
  for (let i = from; i < to; i += 2) if (flat[i] === value) return flat[i + 1] as number;
  return 0;
}

/** The bits of all the names `held` lists, among those of `flat` from `from` to `to`. */
function scanAny(flat: readonly unknown[], from: number, to: number, held: readonly unknown[]): number {
  let bits = 0;
  for (let h = 0; h < held.length; h++) bits |= scanOne(flat, from, to, held[h]);
  return bits;
}

function hashAny(map: Hashed, held: readonly unknown[]): number {
  let bits = 0;
  for (let i = 0; i < held.length; i++) bits |= map.get(held[i]) ?? 0;
  return bits;
}

/** A copy of the lists, taken now, since the document may change after compiling; null for an unusual form. */
export function plainPrincipals(match: PrincipalMatch): Who | null {
  if (typeof match !== 'object' || match === null) return null;
  const who: Partial<Record<PrincipalField, readonly unknown[] | undefined>> = {};
  for (const field of PRINCIPAL_FIELDS) {
    const values: unknown = match[field];
    if (values !== undefined && !Array.isArray(values)) return null;
    who[field] = values === undefined ? undefined : [...(values as unknown[])];
  }
  return who as Who;
}

function holdsAny(wanted: Members | null, held: unknown[] | undefined): boolean {
  if (wanted === null || held === undefined) return false;
  if (Array.isArray(held)) {
    for (let i = 0; i < held.length; i++) if (isMember(wanted, held[i])) return true;
    return false;
  }
  // an unvalidated call may hold a string here, which iterates by character as it always did
  for (const value of held as Iterable<unknown>) if (isMember(wanted, value)) return true;
  return false;
}

export function compilePrincipals(match: PrincipalMatch): (principal: CallPrincipal | undefined) => boolean {
  const users = members(match.users);
  const roles = members(match.roles);
  const groups = members(match.groups);
  const gateways = members(match.gateways);
  const sessions = members(match.sessions);
  return (principal) =>
    principal != null &&
    ((users !== null && principal.user !== undefined && isMember(users, principal.user)) ||
      holdsAny(roles, principal.roles) ||
      holdsAny(groups, principal.groups) ||
      (gateways !== null && principal.gateway !== undefined && isMember(gateways, principal.gateway)) ||
      (sessions !== null && principal.session !== undefined && isMember(sessions, principal.session)));
}
