import { expect } from 'vitest';
import { browserSignIn, LocalIdp } from '../auth/local-idp';
import type { TestControlPlane } from '../support/control-plane';
import { Browser, type Step } from '../support/form-browser.mjs';

export type { Step };

/**
 * A browser without a window (form-browser.mjs: cookies per origin, every
 * redirect followed by hand across origins, the control plane's and the
 * upstream authorization server's) that signs in through the organisation's
 * identity provider.
 */
export class HeadlessBrowser extends Browser {
  /** Signs in to the control plane's console as `person`, through the organisation's identity provider. */
  async signIn(cp: TestControlPlane, idp: LocalIdp, person: Record<string, unknown>): Promise<void> {
    idp.person = person;
    const signedIn = await browserSignIn(cp);
    expect(signedIn.status, signedIn.text).toBe(302);
    this.remember(new URL(cp.url).origin, new Response(null, { headers: signedIn.headers }));
  }
}

/** The page a way through the browser ended on. */
export function last(steps: Step[]): Step {
  return steps[steps.length - 1]!;
}
