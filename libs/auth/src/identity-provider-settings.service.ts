import { Inject, Injectable } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { describeIssues, DomainError, FieldIssue } from '@aileron/errors';
import { outboundPolicyOf } from '@aileron/net';
import { checkIdpUrl, IdpFetchError } from './idp-http';

export class IdentityProviderUrlRefusedError extends DomainError {
  constructor(issues: FieldIssue[]) {
    super('IDP_URL_REFUSED', describeIssues(issues), { extensions: { errors: issues } });
  }
}

/**
 * The rules an identity provider's settings must meet when an owner saves
 * them; the same rules hold again at every fetch (the name may resolve
 * elsewhere by then).
 */
@Injectable()
export class IdentityProviderSettings {
  constructor(@Inject(APP_CONFIG) private readonly config: Pick<AppConfig, 'upstreamAllowCidrs' | 'mode'>) {}

  /**
   * The URLs the control plane will fetch from: the JWKS always, the issuer
   * (its discovery document) when browser sign-in is set up.
   */
  async assertFetchable(settings: { issuer: string; jwksUrl: string; clientId: string | null }): Promise<void> {
    const policy = outboundPolicyOf(this.config);
    const urls: [string, string][] = [
      ['body.jwks_url', settings.jwksUrl],
      ...(settings.clientId !== null ? [['body.issuer', settings.issuer] as [string, string]] : []),
    ];
    const issues: FieldIssue[] = [];
    for (const [path, url] of urls) {
      try {
        await checkIdpUrl(url, policy);
      } catch (error) {
        if (!(error instanceof IdpFetchError)) throw error;
        issues.push({ path, message: error.reason });
      }
    }
    if (issues.length > 0) throw new IdentityProviderUrlRefusedError(issues);
  }
}
