import type { Settings } from './settings';

/**
 * The control plane said no (a problem document) or could not be reached.
 * `code` is the problem's stable code (SESSION_ENDED, TOKEN_EXPIRED,
 * CAPABILITY_REQUIRED, …); the message is worded for the agent reading it.
 */
export class ControlPlaneError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
  ) {
    super(describe(status, code, detail));
    this.name = 'ControlPlaneError';
  }
}

/** What each refusal means for an agent holding a session token, so it can tell its people rather than retry. */
function describe(status: number, code: string, detail: string): string {
  if (status === 0) return `The Aileron control plane cannot be reached (${detail})`;
  if (status === 401)
    return `The Aileron control plane refused the session token (${code}: ${detail}). The session is over for this token: ask the person who started it for a new session.`;
  if (code === 'CAPABILITY_REQUIRED') return `This session token may not do that (${code}: ${detail})`;
  return `The Aileron control plane answered ${status} (${code}: ${detail})`;
}

interface Problem {
  code?: unknown;
  detail?: unknown;
  title?: unknown;
}

/** Reads an error response as the problem document every control-plane error is. */
export async function problemOf(response: Response): Promise<ControlPlaneError> {
  const text = await response.text().catch(() => '');
  let problem: Problem = {};
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed && typeof parsed === 'object') problem = parsed as Problem;
  } catch {
    // not a problem document: a proxy in between, or not a control plane at all
  }
  const code = typeof problem.code === 'string' ? problem.code : `HTTP_${response.status}`;
  const detail =
    typeof problem.detail === 'string'
      ? problem.detail
      : typeof problem.title === 'string'
        ? problem.title
        : response.statusText || 'no detail';
  return new ControlPlaneError(response.status, code, detail);
}

/** undici says "fetch failed" and puts the reason (ECONNREFUSED, ENOTFOUND…) in `cause`. */
export function unreachable(error: unknown): ControlPlaneError {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } }).cause;
  const reason =
    (typeof cause?.code === 'string' && cause.code) ||
    (typeof cause?.message === 'string' && cause.message) ||
    (error instanceof Error ? error.message : String(error));
  return new ControlPlaneError(0, 'UNREACHABLE', reason);
}

export interface ApprovalView {
  id: string;
  status: 'pending' | 'approved' | 'denied' | 'expired' | 'cancelled';
  server: string;
  tool: string;
  review_url: string;
  reason: string | null;
  decided_at: string | null;
  expires_at: string;
  consumed_at: string | null;
}

export interface MessageView {
  id: string;
  direction: 'agent' | 'people';
  text: string;
  level: string;
  author: string;
  created_at: string;
}

/** Slack on top of a long-poll, so our own timeout never fires before the server answers. */
const SLACK_MS = 30_000;

/** The REST endpoints a session token may use: its approvals and its message channel. */
export class ControlPlane {
  constructor(private readonly settings: Settings) {}

  approval(id: string, waitSeconds: number, signal?: AbortSignal): Promise<ApprovalView> {
    const query = waitSeconds > 0 ? `?wait=${waitSeconds}` : '';
    return this.request<ApprovalView>(
      'GET',
      `/v1/approvals/${encodeURIComponent(id)}${query}`,
      undefined,
      waitSeconds,
      signal,
    );
  }

  postMessage(text: string, level: string, signal?: AbortSignal): Promise<MessageView> {
    return this.request<MessageView>('POST', `${this.agentSessionPath}/messages`, { text, level }, 0, signal);
  }

  async replies(after: string, waitSeconds: number, signal?: AbortSignal): Promise<MessageView[]> {
    const path = `${this.agentSessionPath}/messages?after=${encodeURIComponent(after)}&wait=${waitSeconds}`;
    return (await this.request<{ items: MessageView[] }>('GET', path, undefined, waitSeconds, signal)).items;
  }

  /** The agent session's path, under its workspace like every tenant resource. */
  private get agentSessionPath(): string {
    return `/v1/workspaces/${encodeURIComponent(this.settings.workspace)}/sessions/${encodeURIComponent(this.settings.sessionId)}`;
  }

  private async request<T>(
    method: string,
    path: string,
    body: unknown,
    waitSeconds: number,
    signal?: AbortSignal,
  ): Promise<T> {
    const timeout = AbortSignal.timeout(waitSeconds * 1000 + SLACK_MS);
    let response: Response;
    try {
      response = await fetch(this.settings.url + path, {
        method,
        headers: {
          authorization: `Bearer ${this.settings.token}`,
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      });
    } catch (error) {
      if (signal?.aborted) throw error;
      throw unreachable(error);
    }
    if (!response.ok) throw await problemOf(response);
    return (await response.json()) as T;
  }
}
