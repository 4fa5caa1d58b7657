// A browser, as far as the conformance adapters need one: the control plane's
// cookies, every redirect followed by hand (so another origin's callback is
// reached as the browser would reach it), and the embedded mode's sign-in link.
// Plain JavaScript: pool-client.mjs runs it on the machine's Node with no build
// step; conformance.test.ts imports it too.

export class Browser {
  /** @param {string} base the control plane's URL */
  constructor(base) {
    this.base = base.replace(/\/+$/, '');
    this.origin = new URL(this.base).origin;
    /** @type {Map<string, string>} */
    this.cookies = new Map();
  }

  /** Keeps the cookies a response of the control plane set. */
  remember(response) {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair.indexOf('=');
      this.cookies.set(pair.slice(0, at).trim(), pair.slice(at + 1));
    }
  }

  /** The cookie header for a request to the control plane. */
  cookie() {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  /**
   * Signs in to the console with a one-time link, as `npm start` prints one:
   * `token` is an owner's API token of the embedded mode.
   */
  async signIn(token) {
    const made = await fetch(`${this.base}/v1/auth/sign-in-links`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
    });
    if (!made.ok) throw new Error(`sign-in link: ${made.status} ${await made.text()}`);
    const code = new URL((await made.json()).url).hash.replace(/^#code=/, '');
    const signedIn = await fetch(`${this.base}/v1/auth/sign-in-link`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: this.origin },
      body: JSON.stringify({ code }),
    });
    if (!signedIn.ok) throw new Error(`sign-in: ${signedIn.status} ${await signedIn.text()}`);
    this.remember(signedIn);
  }

  /**
   * Opens `url` and follows its redirects to the page they end on (a form's
   * post with `form`): the control plane gets its cookies (and an Origin on a
   * post), any other origin none.
   */
  async browse(url, form) {
    let next = url;
    let body = form ? new URLSearchParams(form).toString() : undefined;
    for (let hops = 0; hops < 20; hops++) {
      const target = new URL(next);
      const ours = target.origin === this.origin;
      const headers = {};
      if (ours && this.cookies.size > 0) headers.cookie = this.cookie();
      if (body !== undefined) {
        headers['content-type'] = 'application/x-www-form-urlencoded';
        headers.origin = this.origin;
      }
      const response = await fetch(target, {
        method: body !== undefined ? 'POST' : 'GET',
        redirect: 'manual',
        headers,
        ...(body !== undefined ? { body } : {}),
      });
      if (ours) this.remember(response);
      body = undefined;
      const location = response.headers.get('location');
      if (response.status >= 300 && response.status < 400 && location) {
        next = new URL(location, target).href;
        continue;
      }
      return { url: target.href, status: response.status, text: await response.text() };
    }
    throw new Error('too many redirects');
  }
}
