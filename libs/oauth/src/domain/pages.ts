/**
 * The pages a person sees while an MCP client asks for access: the consent
 * page and the refusals. Plain server-rendered HTML, no script; everything a
 * client's metadata supplies (its name, its URLs) is hostile input and is
 * escaped, as is everything else that is not a literal of this file.
 */

export interface ConsentView {
  uid: string;
  /** the client's own name, as its metadata gave it; null when it gave none */
  clientName: string | null;
  clientId: string;
  /** how the client registered: `metadata_document` (its id is a URL the control plane fetched) or `dynamic` */
  registration: 'metadata_document' | 'dynamic';
  /** where the browser goes back to with the code */
  redirectUri: string;
  workspace: { slug: string; name: string };
  organization: string;
  person: string;
  /** the MCP endpoint the token will reach */
  resource: string;
  csrf: string;
}

export interface RefusalView {
  title: string;
  message: string;
  /** the interaction to end with access_denied, so the client hears of the refusal; null when there is none */
  uid: string | null;
  csrf: string | null;
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text for HTML content and double-quoted attribute values. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** The host of a URL, for a person to recognise; the whole text when it is not a URL. */
function hostOf(value: string): string {
  return URL.canParse(value) ? new URL(value).host : value;
}

export function consentPage(view: ConsentView, nonce: string): string {
  const e = escapeHtml;
  const who =
    view.registration === 'metadata_document'
      ? `<p class="note">Its identity is the address <code>${e(view.clientId)}</code>, where the control plane read its description. The name above is the client's own claim.</p>`
      : `<p class="note">It registered itself with this control plane (dynamic registration, client id <code>${e(view.clientId)}</code>); the name above is its own claim.</p>`;
  const body = `
<h1>Allow <span class="client">${e(view.clientName ?? hostOf(view.clientId))}</span> to use workspace ${e(view.workspace.name)}?</h1>
${who}
<p>Signed in as <strong>${e(view.person)}</strong> in organisation <strong>${e(view.organization)}</strong>.</p>
<h2>If you allow it, it may</h2>
<ul>
  <li>call the tools of every MCP server of workspace <strong>${e(view.workspace.name)}</strong> (<code>${e(view.workspace.slug)}</code>) through <code>${e(view.resource)}</code>, including its sandbox tools, <strong>as you</strong>;</li>
  <li>do so until you or an admin disconnect it; the workspace's policy decides each call as it does yours, and each call is in the audit log under your name with this client's.</li>
</ul>
<p>It may not use the REST API, other workspaces or anything else you can reach.</p>
<p>After this the browser returns to <code>${e(hostOf(view.redirectUri))}</code>.</p>
<form method="post" action="/oauth/interaction/${encodeURIComponent(view.uid)}/confirm">
  <input type="hidden" name="csrf" value="${e(view.csrf)}">
  <button type="submit" name="decision" value="allow">Allow</button>
  <button type="submit" name="decision" value="deny" class="secondary">Deny</button>
</form>`;
  return page('Allow access to Aileron', body, nonce);
}

export function refusalPage(view: RefusalView, nonce: string): string {
  const e = escapeHtml;
  const back =
    view.uid !== null && view.csrf !== null
      ? `<form method="post" action="/oauth/interaction/${encodeURIComponent(view.uid)}/confirm">
  <input type="hidden" name="csrf" value="${e(view.csrf)}">
  <button type="submit" name="decision" value="deny">Tell the client and go back</button>
</form>`
      : '<p>You can close this page and start again from your MCP client.</p>';
  return page(view.title, `<h1>${e(view.title)}</h1>\n<p>${e(view.message)}</p>\n${back}`, nonce);
}

/** A page that says one thing: how something a person did in the browser ended. */
export function messagePage(view: { title: string; message: string; next?: string }, nonce: string): string {
  const e = escapeHtml;
  return page(
    view.title,
    `<h1>${e(view.title)}</h1>\n<p>${e(view.message)}</p>\n<p>${e(view.next ?? 'You can close this page.')}</p>`,
    nonce,
  );
}

function page(title: string, body: string, nonce: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${escapeHtml(title)}</title>
<style nonce="${escapeHtml(nonce)}">
body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#1a1b1e}
h1{font-size:1.4rem}h2{font-size:1.05rem}code{background:#f1f3f5;padding:0 .2rem;word-break:break-all}
.client{color:#1864ab}.note{color:#495057;font-size:.9rem}
button{font:inherit;padding:.5rem 1.2rem;margin-right:.5rem;border-radius:4px;border:1px solid #1864ab;background:#1864ab;color:#fff;cursor:pointer}
button.secondary{background:#fff;color:#1864ab}
</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;
}

/** The Content-Security-Policy of these pages: nothing but their own style and forms to this origin. */
export function pagesCsp(nonce: string): string {
  // no form-action: the answer to the form redirects on to the client's redirect URI, which a form-action would block
  return `default-src 'none'; style-src 'nonce-${nonce}'; base-uri 'none'; frame-ancestors 'none'`;
}

/** The headers every one of these pages goes out with: its CSP, never framed, never cached. */
export function pageHeaders(nonce: string): Record<string, string> {
  return {
    'content-type': 'text/html; charset=utf-8',
    'content-security-policy': pagesCsp(nonce),
    'x-frame-options': 'DENY',
    // not no-referrer: a browser then sends `Origin: null` with a form, which the CSRF check rightly refuses
    'referrer-policy': 'same-origin',
    'cache-control': 'no-store',
  };
}
