/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document,
 * the MCP authorization spec's preferred registration): a client's id is an
 * https URL, and the JSON document there is its registration. Anyone can
 * publish one, so the document is hostile input: these rules decide what
 * may be fetched and what may be believed, before oidc-provider validates
 * the metadata as it would any client's.
 */

export interface ClientIdRules {
  /** plain http to this machine (tests, a local client): only by the operator's setting */
  allowHttpLoopback: boolean;
}

/** metadata fields a person reads on the consent page or in the connected clients' list */
const DISPLAYED = ['client_name'] as const;
/** metadata fields that are URLs of the client's web pages: https only, as oidc-provider requires of documents */
const WEB_URIS = ['client_uri', 'logo_uri', 'policy_uri', 'tos_uri', 'jwks_uri'] as const;
/** token endpoint authentication with a shared secret: nobody can share one with a document anyone can read */
const SECRET_AUTH_METHODS = new Set(['client_secret_basic', 'client_secret_post', 'client_secret_jwt']);
const MAX_ID_LENGTH = 2048;
const MAX_DISPLAYED_LENGTH = 200;
const LOOPBACK_HOSTS = /^(localhost|127\.\d{1,3}\.\d{1,3}\.\d{1,3}|\[::1\])$/;

/** Markup, controls and the characters that reorder text (a name that reads differently than it is). */
function notPlainText(c: string): boolean {
  const code = c.codePointAt(0)!;
  return (
    c === '<' ||
    c === '>' ||
    code < 0x20 ||
    code === 0x7f ||
    (code >= 0x202a && code <= 0x202e) ||
    (code >= 0x2066 && code <= 0x2069)
  );
}

/** Whether a client_id is meant as the URL of a metadata document (rather than a registered client's id). */
export function isClientIdUrl(id: string): boolean {
  return /^https?:\/\//i.test(id);
}

/** Why a client_id URL cannot name a metadata document we fetch, or null when it can. */
export function clientIdUrlProblem(id: string, rules: ClientIdRules): string | null {
  if (id.length > MAX_ID_LENGTH) return `is longer than ${MAX_ID_LENGTH} characters`;
  // spaces, controls and backslashes are normalised away by URL parsers: what was asked must be what is fetched
  if ([...id].some((c) => c <= ' ' || c === '\u007f' || c === '\\'))
    return 'contains spaces, control characters or backslashes';
  if (!URL.canParse(id)) return 'is not a URL';
  const url = new URL(id);
  const loopbackHttp = url.protocol === 'http:' && LOOPBACK_HOSTS.test(url.hostname);
  if (url.protocol !== 'https:' && !(loopbackHttp && rules.allowHttpLoopback))
    return loopbackHttp
      ? 'must be an https URL (plain http to this machine only where the operator allows it: AILERON_OAUTH_HTTP_CLIENT_IDS)'
      : 'must be an https URL';
  if (url.username || url.password) return 'must not carry a user name or password';
  if (id.includes('#')) return 'must not have a fragment';
  const path = id.slice(id.indexOf('//') + 2).replace(/^[^/?]*/, '');
  if (path === '' || path.startsWith('?') || url.pathname === '/')
    return 'must have a path (the document is at a path)';
  if (
    path
      .split('?')[0]!
      .split('/')
      .some((segment) => ['.', '..'].includes(segment.replace(/%2e/gi, '.')))
  )
    return 'must not have "." or ".." segments';
  return null;
}

/**
 * Why a fetched document cannot be a client's registration, or null when it
 * can (oidc-provider still validates the metadata itself: redirect URIs,
 * grant and response types).
 */
export function clientMetadataDocumentProblem(id: string, document: unknown, rules: ClientIdRules): string | null {
  if (typeof document !== 'object' || document === null || Array.isArray(document)) return 'is not a JSON object';
  const metadata = document as Record<string, unknown>;
  if (metadata.client_id !== id) return 'names another client_id than the URL it is at';
  if ('client_secret' in metadata || 'client_secret_expires_at' in metadata)
    return 'must not contain a client_secret: anyone can read the document';
  const method = metadata.token_endpoint_auth_method;
  if (typeof method === 'string' && SECRET_AUTH_METHODS.has(method))
    return `must not use "${method}": a client described by a public document has no shared secret`;
  const redirects = metadata.redirect_uris;
  if (!Array.isArray(redirects) || redirects.length === 0 || !redirects.every((uri) => typeof uri === 'string'))
    return 'must list its redirect_uris';
  for (const field of DISPLAYED) {
    const value = metadata[field];
    if (value === undefined) continue;
    if (typeof value !== 'string' || value.trim() === '') return `${field} must be a non-empty string`;
    if (value.length > MAX_DISPLAYED_LENGTH) return `${field} is longer than ${MAX_DISPLAYED_LENGTH} characters`;
    // a name is plain text: markup or controls in it are there to fool a person or a page
    if ([...value].some(notPlainText))
      return `${field} must be plain text (no markup, control or direction-override characters)`;
  }
  for (const field of WEB_URIS) {
    const value = metadata[field];
    if (value === undefined) continue;
    if (typeof value !== 'string' || !URL.canParse(value)) return `${field} must be a URL`;
    const url = new URL(value);
    const loopbackHttp = url.protocol === 'http:' && LOOPBACK_HOSTS.test(url.hostname);
    if (url.protocol !== 'https:' && !(loopbackHttp && rules.allowHttpLoopback)) return `${field} must be an https URL`;
  }
  return null;
}
