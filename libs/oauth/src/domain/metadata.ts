import { z } from 'zod';

/**
 * The two metadata documents MCP authorization discovers through, as this
 * side serves them and as a client of other servers reads them: RFC 9728
 * protected resource metadata, RFC 8414 authorization server metadata (or
 * OpenID Connect discovery, its superset).
 */
const url = z.string().refine((value) => URL.canParse(value), 'must be a URL');

export const protectedResourceMetadataSchema = z.looseObject({
  resource: url,
  authorization_servers: z.array(url).optional(),
  scopes_supported: z.array(z.string()).optional(),
  bearer_methods_supported: z.array(z.string()).optional(),
  resource_name: z.string().optional(),
});
export type ProtectedResourceMetadata = z.infer<typeof protectedResourceMetadataSchema>;

export const authorizationServerMetadataSchema = z.looseObject({
  issuer: url,
  authorization_endpoint: url,
  token_endpoint: url,
  registration_endpoint: url.optional(),
  revocation_endpoint: url.optional(),
  introspection_endpoint: url.optional(),
  jwks_uri: url.optional(),
  scopes_supported: z.array(z.string()).optional(),
  response_types_supported: z.array(z.string()),
  grant_types_supported: z.array(z.string()).optional(),
  code_challenge_methods_supported: z.array(z.string()).optional(),
  token_endpoint_auth_methods_supported: z.array(z.string()).optional(),
  client_id_metadata_document_supported: z.boolean().optional(),
});
export type AuthorizationServerMetadata = z.infer<typeof authorizationServerMetadataSchema>;

/**
 * Where an issuer's metadata may be, in the order the MCP authorization spec
 * tries them: RFC 8414 with the well-known segment inserted before the
 * issuer's path, OpenID Connect discovery inserted likewise, then appended
 * (an issuer without a path has the first two only).
 */
export function authorizationServerMetadataUrls(issuer: string): string[] {
  const parsed = new URL(issuer);
  const path = parsed.pathname.replace(/\/+$/, '');
  const at = (wellKnown: string, suffix = ''): string => `${parsed.origin}${wellKnown}${suffix}`;
  if (path === '') return [at('/.well-known/oauth-authorization-server'), at('/.well-known/openid-configuration')];
  return [
    at('/.well-known/oauth-authorization-server', path),
    at('/.well-known/openid-configuration', path),
    at(path, '/.well-known/openid-configuration'),
  ];
}
