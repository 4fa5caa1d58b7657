import { describe, expect, it } from 'vitest';
import { IdentityProviderSettings, IdentityProviderUrlRefusedError } from './identity-provider-settings.service';

const embedded = new IdentityProviderSettings({ mode: 'embedded', upstreamAllowCidrs: [] });
const server = new IdentityProviderSettings({ mode: 'server', upstreamAllowCidrs: [] });

async function refusal(
  settings: IdentityProviderSettings,
  values: { issuer: string; jwksUrl: string; clientId: string | null },
) {
  try {
    await settings.assertFetchable(values);
  } catch (error) {
    return error;
  }
  return null;
}

describe('identity-provider settings, as an owner saves them', () => {
  it('refuse a JWKS URL the control plane would not fetch from, naming the field and why', async () => {
    for (const jwksUrl of [
      'http://login.example.com/jwks',
      'https://169.254.169.254/latest',
      'https://10.0.0.8/jwks',
      'https://[fd00::1]/jwks',
    ]) {
      const error = await refusal(embedded, { issuer: 'https://login.example.com/', jwksUrl, clientId: null });
      expect(error, jwksUrl).toBeInstanceOf(IdentityProviderUrlRefusedError);
      expect(error).toMatchObject({
        code: 'IDP_URL_REFUSED',
        status: 422,
        extensions: { errors: [{ path: 'body.jwks_url', message: expect.any(String) }] },
      });
    }
    expect(
      ((await refusal(embedded, { issuer: 'x', jwksUrl: 'http://login.example.com/jwks', clientId: null })) as Error)
        .message,
    ).toContain('https');
  });

  it('allow loopback only where the installation does: embedded mode, or UPSTREAM_ALLOW_CIDRS', async () => {
    const loopback = { issuer: 'https://login.example.com/', jwksUrl: 'http://127.0.0.1:4000/jwks', clientId: null };
    expect(await refusal(embedded, loopback)).toBeNull();
    expect(await refusal(server, loopback)).toMatchObject({
      code: 'IDP_URL_REFUSED',
      message: expect.stringContaining('loopback'),
    });
    expect(
      await refusal(new IdentityProviderSettings({ mode: 'server', upstreamAllowCidrs: ['127.0.0.1/32'] }), loopback),
    ).toBeNull();
  });

  it('check the issuer too when browser sign-in will fetch its discovery document', async () => {
    const withClient = {
      issuer: 'https://10.0.0.9/realms/x',
      jwksUrl: 'http://127.0.0.1:4000/jwks',
      clientId: 'aileron',
    };
    expect(await refusal(embedded, withClient)).toMatchObject({ extensions: { errors: [{ path: 'body.issuer' }] } });
    expect(await refusal(embedded, { ...withClient, clientId: null })).toBeNull();
  });
});
