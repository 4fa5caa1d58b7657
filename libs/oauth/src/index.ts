export { OauthModule } from './oauth.module';
export { OauthGrants } from './oauth-grants.service';
export { OauthSweep } from './oauth-sweep.service';
export type { GrantRecord } from './oauth.repository';
// the protocol's pure pieces, for the pool's side (an OAuth client of upstream MCP servers)
export * from './domain/pkce';
export * from './domain/metadata';
export * from './domain/resource';
export { clientIdUrlProblem, clientMetadataDocumentProblem, isClientIdUrl } from './domain/client-metadata';
export { escapeHtml, messagePage, pageHeaders } from './domain/pages';
