import { CaveatTokenError, looksLikeCaveatToken, peekIdentity } from '@aileron/sessions/caveat-token';

/** What aileron-mcp needs to know, all from its environment (the agent's MCP config sets it). */
export interface Settings {
  /** the control plane, without a trailing slash */
  url: string;
  token: string;
  sessionId: string;
  workspace: string;
}

/** A setting that is missing or wrong; main prints it as one line and exits 78 (EX_CONFIG). */
export class SettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SettingsError';
  }
}

const SLUG = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

function required(env: NodeJS.ProcessEnv, name: string, what: string): string {
  const value = env[name]?.trim();
  if (!value) throw new SettingsError(`${name} is not set: ${what}`);
  return value;
}

/**
 * Reads the environment. The session id is also in the token's identifier, so
 * AILERON_SESSION_ID may be left out; when given it must agree, or the agent
 * would talk about one session while acting as another.
 */
export function readSettings(env: NodeJS.ProcessEnv): Settings {
  const rawUrl = required(env, 'AILERON_URL', "the control plane's URL, e.g. https://aileron.example.com");
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new SettingsError(
      `AILERON_URL is not a URL (${JSON.stringify(rawUrl)}); expected e.g. https://aileron.example.com`,
    );
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new SettingsError(`AILERON_URL must be http:// or https:// (got ${url.protocol})`);
  if (url.username || url.password || url.search || url.hash)
    throw new SettingsError('AILERON_URL must be a plain URL: no credentials, query or fragment');

  const token = required(env, 'AILERON_TOKEN', 'the session caveat token (ail_ct_…) the session was started with');
  if (!looksLikeCaveatToken(token)) {
    throw new SettingsError(
      'AILERON_TOKEN is not a session caveat token (ail_ct_…): a sandbox holds only a session token, never an API or gateway token',
    );
  }
  let tokenSession: string;
  try {
    tokenSession = peekIdentity(token).identity.sessionId;
  } catch (error) {
    if (error instanceof CaveatTokenError)
      throw new SettingsError(`AILERON_TOKEN is not a well-formed session token (${error.code})`);
    throw error;
  }
  const sessionId = env.AILERON_SESSION_ID?.trim() || tokenSession;
  if (sessionId !== tokenSession)
    throw new SettingsError(
      `AILERON_SESSION_ID (${sessionId}) is not the session AILERON_TOKEN belongs to (${tokenSession})`,
    );

  const workspace = required(
    env,
    'AILERON_WORKSPACE',
    "the slug of the session's workspace (GET /v1/workspaces/{ws}/sessions/{id}/agent-config fills it in)",
  );
  if (!SLUG.test(workspace))
    throw new SettingsError(`AILERON_WORKSPACE is not a workspace slug (${JSON.stringify(workspace)})`);

  return { url: (url.origin + url.pathname).replace(/\/+$/, ''), token, sessionId, workspace };
}
