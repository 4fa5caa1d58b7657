import { describe, expect, it } from 'vitest';
import { consentPage, refusalPage } from './pages';

const hostile = '"><script>alert(1)</script><img src=x onerror=alert(2)>';

describe('the consent page', () => {
  it('escapes everything a client supplies, names the workspace and what the client may do', () => {
    const html = consentPage(
      {
        uid: 'abc',
        clientName: hostile,
        clientId: `https://client.example.com/c.json?${hostile}`,
        registration: 'metadata_document',
        redirectUri: `http://127.0.0.1:1234/cb?x=${hostile}`,
        workspace: { slug: 'team-a', name: `Team <A>` },
        organization: 'Acme & Co',
        person: 'Pat',
        resource: 'https://aileron.example.com/mcp/team-a',
        csrf: 'token"x',
      },
      'n0nce',
    );
    expect(html).not.toContain('<script>');
    expect(html).not.toContain('<img');
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).toContain('Team &lt;A&gt;');
    expect(html).toContain('Acme &amp; Co');
    expect(html).toContain('value="token&quot;x"');
    expect(html).toContain('https://aileron.example.com/mcp/team-a');
    expect(html).toMatch(/as you/);
    expect(html).toContain('<style nonce="n0nce">');
  });

  it('escapes a refusal’s message', () => {
    const html = refusalPage({ title: 'No', message: hostile, uid: null, csrf: null }, 'n');
    expect(html).not.toContain('<script>');
    expect(html).not.toContain('<form');
  });
});
