import { CSRF_HEADER } from '@aileron/auth';

/** How the page may authenticate its reader, decided when it is served. */
export interface ReviewPageOptions {
  /** the organisation's identity provider, when it is set up for browser sign-in */
  signIn: { href: string; label: string } | null;
  /** a valid browser-session cookie came with the request: who it is, and the CSRF token its changes carry */
  browserSession: { name: string; csrf: string } | null;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A value for the page's script: JSON, with `<` escaped so no string can close the script element. */
function scriptValue(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c');
}

/**
 * The review page at `review_url`: shows the exact call and lets an approver
 * decide, signed in through the organisation's identity provider (a browser-session
 * cookie the page cannot read; its changes carry a CSRF token), through a
 * one-time link (`?link=`), or with a pasted token kept in the tab's session
 * storage. Every value is written as text, never as HTML: arguments come from
 * the agent.
 */
export function reviewPage(id: string, nonce: string, options: ReviewPageOptions): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Aileron · approval request</title>
<style nonce="${nonce}">
  body { font: 15px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 46rem; padding: 0 1rem; color: #1d2330; }
  h1 { font-size: 1.3rem; } dt { font-weight: 600; } dd { margin: 0 0 .6rem 0; }
  pre { background: #f4f6fa; padding: .8rem; overflow: auto; border-radius: 6px; }
  .status { display: inline-block; padding: .1rem .5rem; border-radius: 4px; background: #e8ecf3; }
  .actions { margin-top: 1rem; display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
  button { font: inherit; padding: .4rem 1rem; border-radius: 6px; border: 1px solid #aab; cursor: pointer; }
  #approve { background: #1f7a3f; color: #fff; border-color: #1f7a3f; } #deny { background: #a32020; color: #fff; border-color: #a32020; }
  #error { color: #a32020; } [hidden] { display: none !important; }
  input { font: inherit; padding: .3rem; min-width: 18rem; }
  a.button { display: inline-block; padding: .4rem 1rem; border-radius: 6px; background: #24467a; color: #fff; text-decoration: none; }
</style>
</head>
<body>
<h1>Approval request</h1>
<p id="error" role="alert"></p>
<section id="signin" hidden>
${options.signIn ? `<p><a id="idp-signin" class="button" href="${escapeHtml(options.signIn.href)}">Sign in with ${escapeHtml(options.signIn.label)}</a></p>\n  <p>Or paste an Aileron token or your organisation's sign-in token (JWT):</p>` : "<p>Sign in to review: paste your Aileron token or your organisation's sign-in token (JWT).</p>"}
  <form id="token-form">
    <input id="token" type="password" autocomplete="off" aria-label="token"> <button type="submit">Sign in</button>
  </form>
</section>
<p id="viewer" hidden></p>
<section id="request" hidden>
  <p>Status: <span id="status" class="status"></span></p>
  <dl>
    <dt>Who asks</dt><dd id="requester"></dd>
    <dt>Call</dt><dd><code id="call"></code></dd>
    <dt>Arguments</dt><dd><pre id="arguments"></pre></dd>
    <dt>Rule</dt><dd id="rules"></dd>
    <dt>Route</dt><dd id="route"></dd>
    <dt>Session</dt><dd id="session"></dd>
    <dt>Expires</dt><dd id="expires"></dd>
    <dt>Decisions</dt><dd id="decisions"></dd>
  </dl>
  <div class="actions" id="actions" hidden>
    <input id="reason" placeholder="reason (optional)" aria-label="reason">
    <button id="approve" type="button">Approve</button>
    <button id="deny" type="button">Deny</button>
  </div>
</section>
<script nonce="${nonce}">
(() => {
  const id = ${JSON.stringify(id)};
  const link = new URLSearchParams(location.search).get('link');
  const session = ${scriptValue(options.browserSession)};
  const $ = (x) => document.getElementById(x);
  const token = () => sessionStorage.getItem('aileron-token');
  const fail = (text) => { $('error').textContent = text; };
  // one way to authenticate per page: the link, else the browser session, else a pasted token
  const mode = () => (link ? 'link' : session ? 'session' : token() ? 'token' : null);
  async function call(method, url, body) {
    const headers = { accept: 'application/json' };
    if (mode() === 'token') headers.authorization = 'Bearer ' + token();
    if (mode() === 'session' && method !== 'GET') headers[${scriptValue(CSRF_HEADER)}] = session.csrf;
    if (body) headers['content-type'] = 'application/json';
    const res = await fetch(url, { method, headers, body: body ? JSON.stringify(body) : undefined });
    const data = await res.json().catch(() => ({}));
    if (!res.ok) { const e = new Error(data.detail || data.title || ('HTTP ' + res.status)); e.status = res.status; throw e; }
    return data;
  }
  function show(r) {
    $('request').hidden = false; $('signin').hidden = true;
    $('status').textContent = r.status + (r.consumed_at ? ' (used)' : '');
    $('requester').textContent = r.requester + ' via ' + r.requested_by;
    $('call').textContent = r.server + ' → ' + r.tool;
    $('arguments').textContent = JSON.stringify(r.arguments, null, 2);
    $('rules').textContent = r.rules.join(', ') || '—';
    $('route').textContent = r.route + ' (' + r.quorum + ' approval' + (r.quorum > 1 ? 's' : '') + ' needed)';
    $('session').textContent = r.session || '—';
    $('expires').textContent = new Date(r.expires_at).toLocaleString();
    $('decisions').textContent = r.decisions.map((d) => d.approver + ': ' + d.decision + (d.reason ? ' (' + d.reason + ')' : '')).join('; ') || 'none yet';
    $('actions').hidden = r.status !== 'pending';
  }
  const urls = {
    link: { view: () => '/review/' + id + '/request?link=' + encodeURIComponent(link), decide: (decision, reason) => ['/review/' + id + '/decision', { link, decision, reason }] },
    session: { view: () => '/review/' + id + '/session', decide: (decision, reason) => ['/review/' + id + '/session/decision', { decision, reason }] },
    token: { view: () => '/v1/approvals/' + id, decide: (decision, reason) => ['/v1/approvals/' + id + '/' + decision, { reason, channel: 'page' }] },
  };
  async function load() {
    try {
      show(await call('GET', urls[mode()].view()));
    } catch (e) {
      if (mode() !== 'link' && e.status === 401) { $('signin').hidden = false; $('viewer').hidden = true; return; }
      fail(e.message);
    }
  }
  async function decide(decision) {
    fail('');
    const [url, body] = urls[mode()].decide(decision, $('reason').value || undefined);
    try { show(await call('POST', url, body)); } catch (e) { fail(e.message); }
  }
  $('approve').addEventListener('click', () => decide('approve'));
  $('deny').addEventListener('click', () => decide('deny'));
  $('token-form').addEventListener('submit', (ev) => { ev.preventDefault(); sessionStorage.setItem('aileron-token', $('token').value.trim()); load(); });
  if (mode() === 'session') { $('viewer').textContent = 'Signed in as ' + session.name; $('viewer').hidden = false; }
  if (!mode()) $('signin').hidden = false; else load();
})();
</script>
</body>
</html>`;
}
