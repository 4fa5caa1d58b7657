// A browser, as far as the tests that drive sign-ins without Chromium need one:
// each origin's cookies, every redirect followed by hand (so another origin's
// callback is reached as the browser would reach it), form posts with their
// Origin, and the embedded mode's sign-in link. Plain JavaScript:
// test/conformance/pool-client.mjs runs it on the machine's Node with no build
// step; TypeScript tests import it too (form-browser.d.mts).

export class Browser {
  constructor() {
    /** @type {Map<string, Map<string, string>>} cookies by origin */
    this.jar = new Map();
  }

  /** Keeps the cookies a response from `origin` set (paths aside), and forgets those it cleared. */
  remember(origin, response) {
    const cookies = this.jar.get(origin) ?? new Map();
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const value = pair.slice(at + 1);
      if (value === '' || /Max-Age=0|expires=Thu, 01 Jan 1970/i.test(line)) cookies.delete(name);
      else cookies.set(name, value);
    }
    this.jar.set(origin, cookies);
  }

  /** The cookie header for a request to `origin`, or undefined. */
  cookie(origin) {
    const cookies = this.jar.get(origin);
    if (!cookies || cookies.size === 0) return undefined;
    return [...cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  /**
   * Signs in to the console of the control plane at `base` with a one-time
   * link, as `npm start` prints one: `token` is an owner's API token of the
   * embedded mode.
   */
  async signInWithLink(base, token) {
    const origin = new URL(base).origin;
    const made = await fetch(`${origin}/v1/auth/sign-in-links`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    if (!made.ok) throw new Error(`sign-in link: ${made.status} ${await made.text()}`);
    const code = new URL((await made.json()).url).hash.replace(/^#code=/, '');
    const signedIn = await fetch(`${origin}/v1/auth/sign-in-link`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin },
      body: JSON.stringify({ code }),
    });
    if (!signedIn.ok) throw new Error(`sign-in: ${signedIn.status} ${await signedIn.text()}`);
    this.remember(origin, signedIn);
  }

  /**
   * Opens `url` (posts `form` to it, when given) and follows the redirects,
   * each request with its origin's cookies, until a page answers, or until it
   * is sent to a URL `stopAt` matches; every step, the last one the page.
   */
  async open(url, stopAt, form) {
    const steps = [];
    let next = url;
    let body = form ? new URLSearchParams(form).toString() : undefined;
    for (let hops = 0; next !== null && hops < 20; hops++) {
      const target = new URL(next);
      if (stopAt?.(target) && hops > 0) {
        steps.push({ url: target.href, status: 0, location: null, text: '' });
        break;
      }
      const headers = { cookie: this.cookie(target.origin) ?? '' };
      if (body !== undefined) {
        headers['content-type'] = 'application/x-www-form-urlencoded';
        headers.origin = target.origin;
      }
      const response = await fetch(target, {
        method: body !== undefined ? 'POST' : 'GET',
        redirect: 'manual',
        headers,
        ...(body !== undefined ? { body } : {}),
      });
      this.remember(target.origin, response);
      body = undefined;
      const location = response.headers.get('location');
      steps.push({ url: target.href, status: response.status, location, text: await response.text() });
      next = response.status >= 300 && response.status < 400 && location ? new URL(location, target).href : null;
    }
    return steps;
  }

  /** The page `url` (or posting `form` to it) ends on, after its redirects. */
  async browse(url, form) {
    const steps = await this.open(url, undefined, form);
    return steps[steps.length - 1];
  }

  /**
   * Answers the consent page `page` of an Aileron control plane's
   * authorization server with Allow, and follows where that leads.
   */
  async allow(page) {
    const uid = /action="\/oauth\/interaction\/([^/"]+)\/confirm"/.exec(page.text)?.[1];
    const csrf = /name="csrf" value="([^"]+)"/.exec(page.text)?.[1];
    if (!uid || !csrf) throw new Error(`not a consent page: ${page.status} at ${page.url}`);
    return this.browse(`${new URL(page.url).origin}/oauth/interaction/${uid}/confirm`, { csrf, decision: 'allow' });
  }
}
