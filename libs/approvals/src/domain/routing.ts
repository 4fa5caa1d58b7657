import { z } from 'zod';

/**
 * A workspace's approval routing: named routes (who may decide, how many must
 * agree, how long a request waits), groups of people, and on-call rotations.
 * A policy rule with effect `approval` names a route; without one the
 * document's `default_route` applies, and without a document the workspace's
 * owners, admins and approvers decide, one of them enough.
 */
const name = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'must be 1-63 lower-case letters, digits, `_` or `-`');
/** a user by id (uuid) or e-mail */
const person = z.string().min(1).max(320);

const approver = z.union([
  z.object({ user: person }).strict(),
  z.object({ role: z.enum(['owner', 'admin', 'approver', 'member', 'auditor']) }).strict(),
  z.object({ group: name }).strict(),
  z.object({ rotation: name }).strict(),
]);

const rotation = z
  .object({
    period: z.enum(['daily', 'weekly']),
    /** when the first member's shift starts; shifts follow in member order */
    start: z.iso.datetime({ offset: true }),
    members: z.array(person).min(1).max(100),
    overrides: z
      .array(
        z
          .object({ from: z.iso.datetime({ offset: true }), to: z.iso.datetime({ offset: true }), member: person })
          .strict(),
      )
      .max(200)
      .default([]),
  })
  .strict();

/**
 * Where a route's requests are also announced: an organisation webhook
 * endpoint by name (a Slack incoming webhook, or any receiver). Named, never
 * given by URL: the URL may carry a token and lives sealed with the endpoint,
 * shown only by host; the endpoint's retries, signing and SSRF rules apply.
 */
const channel = z.object({ webhook: z.string().trim().min(1).max(100) }).strict();

const route = z
  .object({
    approvers: z.array(approver).min(1).max(50),
    /** a channel posts the request with its review link; only the approvers above decide */
    channels: z.array(channel).max(10).optional(),
    quorum: z.number().int().min(1).max(10).default(1),
    expires_in_seconds: z
      .number()
      .int()
      .min(30)
      .max(7 * 86400)
      .default(3600),
  })
  .strict();

export const routingDocumentSchema = z
  .object({
    default_route: name.optional(),
    routes: z.record(name, route).default({}),
    groups: z.record(name, z.array(person).max(500)).default({}),
    rotations: z.record(name, rotation).default({}),
  })
  .strict();

export type RoutingDocument = z.infer<typeof routingDocumentSchema>;
export type Route = z.infer<typeof route>;
export type Approver = z.infer<typeof approver>;
export type RouteChannel = z.infer<typeof channel>;

export const BUILT_IN_ROUTE = 'workspace-admins';
const BUILT_IN: Route = {
  approvers: [{ role: 'owner' }, { role: 'admin' }, { role: 'approver' }],
  quorum: 1,
  expires_in_seconds: 3600,
};

export interface RoutingProblem {
  path: string;
  message: string;
}

/** Validates references between the parts (a route naming a missing group, a quorum no route can reach). */
export function checkRouting(document: RoutingDocument): RoutingProblem[] {
  const problems: RoutingProblem[] = [];
  if (document.default_route && !document.routes[document.default_route]) {
    problems.push({ path: 'default_route', message: `names no route ("${document.default_route}")` });
  }
  for (const [routeName, r] of Object.entries(document.routes)) {
    r.approvers.forEach((a, i) => {
      // a group is declared even when the IdP supplies its members (an empty list): a typo stays an error
      if ('group' in a && !document.groups[a.group]) {
        problems.push({
          path: `routes.${routeName}.approvers[${i}].group`,
          message: `names no group ("${a.group}"); declare it under \`groups\` (an empty list when the identity provider's groups claim supplies its members)`,
        });
      }
      if ('rotation' in a && !document.rotations[a.rotation]) {
        problems.push({
          path: `routes.${routeName}.approvers[${i}].rotation`,
          message: `names no rotation ("${a.rotation}")`,
        });
      }
    });
    const people = r.approvers.every((a) => 'user' in a || 'rotation' in a)
      ? new Set(r.approvers.flatMap((a) => ('user' in a ? [a.user] : ['rotation:' + a.rotation]))).size
      : Infinity;
    if (r.quorum > people)
      problems.push({
        path: `routes.${routeName}.quorum`,
        message: `needs ${r.quorum} different approvers but the route names ${people}`,
      });
  }
  for (const [rotationName, rot] of Object.entries(document.rotations)) {
    rot.overrides.forEach((o, i) => {
      if (Date.parse(o.to) <= Date.parse(o.from))
        problems.push({ path: `rotations.${rotationName}.overrides[${i}]`, message: '`to` must be after `from`' });
    });
  }
  return problems;
}

/** A webhook endpoint a route may name: its name and its workspace filter (null: the whole organisation). */
export interface ChannelEndpoint {
  name: string;
  workspaceId: string | null;
}

/**
 * The channels of every route must be endpoints of the organisation that
 * carry this workspace's events: one filtered to another workspace would
 * otherwise be sent this one's requests.
 */
export function checkChannels(
  document: RoutingDocument,
  endpoints: readonly ChannelEndpoint[],
  workspaceId: string,
): RoutingProblem[] {
  const byName = new Map(endpoints.map((e) => [e.name, e]));
  const problems: RoutingProblem[] = [];
  for (const [routeName, r] of Object.entries(document.routes)) {
    (r.channels ?? []).forEach((c, i) => {
      const endpoint = byName.get(c.webhook);
      const path = `routes.${routeName}.channels[${i}].webhook`;
      if (!endpoint)
        problems.push({
          path,
          message: `names no webhook endpoint of the organisation ("${c.webhook}"); create it first (POST /v1/webhooks)`,
        });
      else if (endpoint.workspaceId !== null && endpoint.workspaceId !== workspaceId)
        problems.push({ path, message: `"${c.webhook}" carries another workspace's events only` });
    });
  }
  return problems;
}

/** The names of the endpoints a route announces its requests to. */
export function channelNames(route: Route): string[] {
  // documents saved before routes had channels have none
  return [...new Set((route.channels ?? []).map((c) => c.webhook))];
}

/** The route a decision uses: the rule's, else the document's default, else the built-in one. */
export function resolveRoute(document: RoutingDocument | null, wanted: string | null): { name: string; route: Route } {
  if (wanted && document?.routes[wanted]) return { name: wanted, route: document.routes[wanted] };
  const fallback = document?.default_route;
  if (fallback && document.routes[fallback]) return { name: fallback, route: document.routes[fallback] };
  return { name: BUILT_IN_ROUTE, route: BUILT_IN };
}

/** Who is on call in a rotation at `at`: an override covering it, else the shift's member. */
export function onCall(rot: RoutingDocument['rotations'][string], at: Date): string {
  const t = at.getTime();
  const override = rot.overrides.find((o) => Date.parse(o.from) <= t && t < Date.parse(o.to));
  if (override) return override.member;
  const shift = rot.period === 'daily' ? 86_400_000 : 7 * 86_400_000;
  const index = Math.floor((t - Date.parse(rot.start)) / shift);
  const n = rot.members.length;
  return rot.members[((index % n) + n) % n]!;
}

/** Someone who might decide: the user behind the caller (if any), their role in the workspace and their IdP groups. */
export interface Candidate {
  userId: string | null;
  email: string | null;
  role: string | null;
  /** the identity provider's groups for the user (the credential's own claims, else those of their last sign-in) */
  idpGroups: readonly string[];
}

/**
 * Whether the candidate is one of the route's approvers at `at`. A group
 * admits the people the document lists and, as well, anyone whose IdP groups
 * include its name (compared without case: the document's names are lower-case).
 */
export function isApprover(document: RoutingDocument | null, route: Route, candidate: Candidate, at: Date): boolean {
  const isPerson = (p: string): boolean =>
    (candidate.userId !== null && p === candidate.userId) ||
    (candidate.email !== null && p.toLowerCase() === candidate.email.toLowerCase());
  const inIdpGroup = (name: string): boolean =>
    candidate.userId !== null && candidate.idpGroups.some((g) => g.toLowerCase() === name);
  return route.approvers.some((a) => {
    if ('role' in a) return candidate.role === a.role;
    if ('user' in a) return isPerson(a.user);
    if ('group' in a) return inIdpGroup(a.group) || (document?.groups[a.group] ?? []).some(isPerson);
    const rot = document?.rotations[a.rotation];
    return rot !== undefined && isPerson(onCall(rot, at));
  });
}

/** The people a route names at `at` (users, group members, who is on call), for notifications and one-time links. */
export function namedPeople(document: RoutingDocument | null, route: Route, at: Date): string[] {
  const people = new Set<string>();
  for (const a of route.approvers) {
    if ('user' in a) people.add(a.user);
    else if ('group' in a) for (const p of document?.groups[a.group] ?? []) people.add(p);
    else if ('rotation' in a && document?.rotations[a.rotation])
      people.add(onCall(document.rotations[a.rotation]!, at));
  }
  return [...people];
}
