import { expect } from 'vitest';
import { browserSignIn, LocalIdp } from '../auth/local-idp';
import type { TestControlPlane } from '../support/control-plane';

/** One step of a browser's way: where it went and what it was answered. */
export interface Step {
  url: string;
  status: number;
  location: string | null;
  text: string;
}

/**
 * A browser without a window: cookies per origin (paths aside), every
 * redirect followed by hand across origins (the control plane, the
 * upstream's authorization server), every step kept.
 */
export class HeadlessBrowser {
  private readonly jar = new Map<string, Map<string, string>>();

  /** Opens `url` and follows redirects until a page answers (or `stopAt` matches a URL it is sent to). */
  async open(url: string, stopAt?: (url: URL) => boolean): Promise<Step[]> {
    const steps: Step[] = [];
    let next: string | null = url;
    for (let hops = 0; next !== null && hops < 20; hops++) {
      const target: URL = new URL(next);
      if (stopAt?.(target) && hops > 0) {
        steps.push({ url: target.href, status: 0, location: null, text: '' });
        break;
      }
      const response = await fetch(target, { redirect: 'manual', headers: { cookie: this.header(target.origin) } });
      this.take(target.origin, response);
      const location = response.headers.get('location');
      steps.push({ url: target.href, status: response.status, location, text: await response.text() });
      next = response.status >= 300 && response.status < 400 && location ? new URL(location, target).href : null;
    }
    return steps;
  }

  /** The cookies a response set, for its origin. */
  take(origin: string, response: Response): void {
    const cookies = this.jar.get(origin) ?? new Map<string, string>();
    this.jar.set(origin, cookies);
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair!.indexOf('=');
      const name = pair!.slice(0, at).trim();
      const value = pair!.slice(at + 1);
      if (value === '' || /Max-Age=0|expires=Thu, 01 Jan 1970/i.test(line)) cookies.delete(name);
      else cookies.set(name, value);
    }
  }

  header(origin: string): string {
    return [...(this.jar.get(origin) ?? [])].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  /** Signs in to the control plane's console as `person`, through the organisation's identity provider. */
  async signIn(cp: TestControlPlane, idp: LocalIdp, person: Record<string, unknown>): Promise<void> {
    idp.person = person;
    const signedIn = await browserSignIn(cp);
    expect(signedIn.status, signedIn.text).toBe(302);
    this.take(new URL(cp.url).origin, new Response(null, { headers: signedIn.headers }));
  }
}

/** The page a way through the browser ended on. */
export function last(steps: Step[]): Step {
  return steps[steps.length - 1]!;
}
