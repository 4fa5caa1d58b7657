import { createHash } from 'node:crypto';

/** A strong validator: the body's digest, so equal bodies on any replica get equal tags. */
export function strongEtag(body: string): string {
  return `"${createHash('sha256').update(body).digest('base64url')}"`;
}

/**
 * RFC 9110 §13.1.2: If-None-Match uses the weak comparison, so `W/"x"` matches
 * `"x"`; a list matches when any member does; `*` matches any current body.
 */
export function ifNoneMatchHits(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header === etag) return true; // what every well-behaved poll sends
  const bare = etag.replace(/^W\//, '');
  for (const part of header.split(',')) {
    const candidate = part.trim();
    if (candidate === '*' || candidate.replace(/^W\//, '') === bare) return true;
  }
  return false;
}
