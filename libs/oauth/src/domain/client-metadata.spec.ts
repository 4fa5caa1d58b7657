import { describe, expect, it } from 'vitest';
import { clientIdUrlProblem, clientMetadataDocumentProblem } from './client-metadata';

const STRICT = { allowHttpLoopback: false };
const LOCAL = { allowHttpLoopback: true };
const ID = 'https://client.example.com/oauth/metadata.json';
const good = { client_id: ID, client_name: 'Example client', redirect_uris: ['http://127.0.0.1:3334/callback'] };

describe('Client ID Metadata Documents', () => {
  it('fetches only https URLs with a path, plain http to this machine only when allowed', () => {
    expect(clientIdUrlProblem(ID, STRICT)).toBeNull();
    expect(clientIdUrlProblem('http://127.0.0.1:9000/client.json', LOCAL)).toBeNull();
    expect(clientIdUrlProblem('http://localhost:9000/client.json', STRICT)).toMatch(/AILERON_OAUTH_HTTP_CLIENT_IDS/);
    expect(clientIdUrlProblem('http://client.example.com/client.json', LOCAL)).toBe('must be an https URL');
    expect(clientIdUrlProblem('https://client.example.com', STRICT)).toMatch(/must have a path/);
    expect(clientIdUrlProblem('https://client.example.com/', STRICT)).toMatch(/must have a path/);
    expect(clientIdUrlProblem('https://user:pw@client.example.com/c.json', STRICT)).toMatch(/user name/);
    expect(clientIdUrlProblem('https://client.example.com/c.json#x', STRICT)).toMatch(/fragment/);
    expect(clientIdUrlProblem('https://client.example.com/a/../c.json', STRICT)).toMatch(/segments/);
    expect(clientIdUrlProblem('https://client.example.com/a/%2E%2E/c.json', STRICT)).toMatch(/segments/);
    expect(clientIdUrlProblem('https://client.example.com/a b.json', STRICT)).toMatch(/spaces/);
    expect(clientIdUrlProblem('https://client.example.com\\@evil.com/c.json', STRICT)).toMatch(/backslashes/);
  });

  it('believes a document only about itself, without secrets, with plain-text names', () => {
    expect(clientMetadataDocumentProblem(ID, good, STRICT)).toBeNull();
    expect(clientMetadataDocumentProblem(ID, [good], STRICT)).toMatch(/not a JSON object/);
    expect(
      clientMetadataDocumentProblem(ID, { ...good, client_id: 'https://other.example.com/c.json' }, STRICT),
    ).toMatch(/another client_id/);
    expect(clientMetadataDocumentProblem(ID, { ...good, client_secret: 's' }, STRICT)).toMatch(/client_secret/);
    expect(
      clientMetadataDocumentProblem(ID, { ...good, token_endpoint_auth_method: 'client_secret_basic' }, STRICT),
    ).toMatch(/shared secret/);
    expect(clientMetadataDocumentProblem(ID, { ...good, redirect_uris: [] }, STRICT)).toMatch(/redirect_uris/);
    expect(clientMetadataDocumentProblem(ID, { ...good, client_name: '<script>alert(1)</script>' }, STRICT)).toMatch(
      /plain text/,
    );
    expect(clientMetadataDocumentProblem(ID, { ...good, client_name: 'Claude\u202egnp.exe' }, STRICT)).toMatch(
      /plain text/,
    );
    expect(clientMetadataDocumentProblem(ID, { ...good, logo_uri: 'http://client.example.com/l.png' }, STRICT)).toMatch(
      /logo_uri must be an https URL/,
    );
  });
});
