/**
 * Which events an endpoint receives. A filter entry is an exact type
 * (`policy.updated`) or every event of one domain (`approval.*`); an empty
 * list means every event. Types are matched literally: no other wildcards, so
 * a filter never matches more than its author can see at a glance.
 */
export const EVENT_FILTER = /^[a-z][a-z0-9_-]*\.(\*|[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*)*)$/;

export function matchesEvent(filters: readonly string[], type: string): boolean {
  if (filters.length === 0) return true;
  return filters.some((filter) => (filter.endsWith('.*') ? type.startsWith(filter.slice(0, -1)) : filter === type));
}

/**
 * Personal notifications carry a credential meant for one person (a one-time
 * review link). They go only to endpoints that name the type exactly, never
 * through `approval.*` or an empty filter, and never in the Slack format,
 * which posts to a shared channel where anyone could use the link.
 */
export function takesPersonalNotification(
  endpoint: { events: readonly string[]; format: string },
  type: string,
): boolean {
  return endpoint.format === 'json' && endpoint.events.includes(type);
}

/** A workspace filter of null takes the whole organisation; otherwise only events of that workspace. */
export function matchesWorkspace(filter: string | null, workspaceId: string | null): boolean {
  return filter === null || filter === workspaceId;
}

/**
 * Whether a directed message (an approval route's announcement) names this
 * endpoint among its `channels`. Only the domain that declared the type writes
 * such messages; nothing a client sends can put a name there.
 */
export function addressedTo(payload: Record<string, unknown>, endpointName: string): boolean {
  return Array.isArray(payload.channels) && payload.channels.includes(endpointName);
}
