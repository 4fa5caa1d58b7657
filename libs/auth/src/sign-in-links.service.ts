import { randomBytes } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { Clock } from '@aileron/clock';
import { DomainError, UnauthenticatedError } from '@aileron/errors';
import { hashToken } from './domain/api-token';
import {
  mintBrowserSessionToken,
  serializeCookie,
  BROWSER_SESSION_COOKIE,
  BROWSER_SESSION_PATH,
  BROWSER_SESSION_TTL_SECONDS,
} from './domain/browser-session';
import { AuthRepository } from './auth.repository';
import { PrincipalResolver, userDeactivated } from './principal.resolver';
import { SystemScopes } from './scope-issuer';
import { TokensService } from './tokens.service';

/** long enough to read a terminal and click, short enough that a scrolled-back link is dead */
export const SIGN_IN_LINK_TTL_SECONDS = 600;
/** the local owner's subject: no identity provider issues one with this prefix */
const LOCAL_OWNER_SUBJECT = 'aileron:local-owner';
/** the page of the console that exchanges the code; the code rides in the fragment, which no server or log sees */
export const SIGN_IN_LINK_PATH = '/sign-in/link';

/**
 * One-time sign-in links of the embedded mode: the terminal that ran
 * `npm start` is the proof of being the machine's owner, so the link it
 * prints signs that person in (a user `Owner (this machine)` with the owner
 * role). A code is random, kept only as a hash, works once and for ten
 * minutes. Kept in memory: an embedded installation is one process (the data
 * directory is locked), and a restart prints a new link.
 */
@Injectable()
export class SignInLinks {
  private readonly codes = new Map<string, { organizationId: string; expiresAt: number }>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly repository: AuthRepository,
    private readonly tokens: TokensService,
    private readonly principals: PrincipalResolver,
    private readonly clock: Clock,
  ) {}

  get available(): boolean {
    return this.config.mode === 'embedded';
  }

  /** A new link for the organisation's owner, as a URL under `base` (where the console is reached). */
  mint(organizationId: string, base: string): { url: string; expiresAt: Date } {
    if (!this.available)
      throw new DomainError(
        'SIGN_IN_LINKS_EMBEDDED_ONLY',
        "Sign-in links exist only in the embedded mode; sign in through the organisation's identity provider",
      );
    const now = this.clock.now();
    for (const [hash, entry] of this.codes) if (entry.expiresAt <= now) this.codes.delete(hash);
    const code = randomBytes(32).toString('base64url');
    const expiresAt = now + SIGN_IN_LINK_TTL_SECONDS * 1000;
    this.codes.set(hashToken(code), { organizationId, expiresAt });
    return { url: `${base}${SIGN_IN_LINK_PATH}#code=${code}`, expiresAt: new Date(expiresAt) };
  }

  /** A link for the organisation named by its slug (the embedded mode's `default`, as `npm start` prints it). */
  async mintForOrganization(slug: string, base: string): Promise<{ url: string; expiresAt: Date }> {
    const organizationId = await this.repository.findOrganizationIdBySlug(SystemScopes.system('sign-in link'), slug);
    if (!organizationId) throw new Error(`no organisation "${slug}" to sign in to`);
    return this.mint(organizationId, base);
  }

  /** Exchanges a code for a browser session of the local owner: the session cookie to set. */
  async redeem(code: string, secure: boolean): Promise<string> {
    const hash = hashToken(code);
    const entry = this.codes.get(hash);
    // used once, whatever happens next
    this.codes.delete(hash);
    if (!entry)
      throw new UnauthenticatedError(
        'This sign-in link is not valid or was already used; run `npm start` again or ask for a new one with the owner token',
        'SIGN_IN_LINK_INVALID',
      );
    const now = this.clock.date();
    if (entry.expiresAt <= now.getTime())
      throw new UnauthenticatedError(
        'This sign-in link has expired (links last 10 minutes); ask for a new one',
        'SIGN_IN_LINK_EXPIRED',
      );
    const scope = SystemScopes.organization(entry.organizationId);
    const userId = await this.repository.ensureLocalOwner(scope, LOCAL_OWNER_SUBJECT, now);
    // an owner offboarded at this machine stays out: no session is opened for them
    if ((await this.repository.findUser(scope, userId))?.deactivatedAt) throw userDeactivated();
    const session = mintBrowserSessionToken();
    await this.repository.createBrowserSession(
      scope,
      { userId, tokenHash: session.hash, expiresAt: new Date(now.getTime() + BROWSER_SESSION_TTL_SECONDS * 1000) },
      now,
    );
    await this.tokens.recordLogin(await this.principals.fromBrowserSession(session.token), 'sign_in_link', {});
    return serializeCookie(BROWSER_SESSION_COOKIE, session.token, {
      path: BROWSER_SESSION_PATH,
      maxAgeSeconds: BROWSER_SESSION_TTL_SECONDS,
      secure,
    });
  }
}
