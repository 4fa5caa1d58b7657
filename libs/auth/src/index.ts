export * from './domain/roles';
export * from './domain/principal';
export * from './domain/claims';
export * from './domain/api-token';
export {
  browserSignInIssuerProblem,
  clearCookie,
  parseCookies,
  serializeCookie,
  CSRF_HEADER,
  BROWSER_SESSION_COOKIE,
} from './domain/browser-session';
export { keepsClientSecret } from './domain/identity-provider';
export type { OrgScope, SystemScope, WorkspaceScope } from './scope';
export { Caller, TenantScope } from './auth.decorators';
export type { AuthenticatedRequest } from './auth.guard';
export { AccessService } from './access.service';
export { changesOnlyAdd, PrincipalCache } from './principal-cache.service';
export { PrincipalResolver } from './principal.resolver';
export { TokensService, tokenView } from './tokens.service';
export type { NewToken } from './tokens.service';
export { slug, uuid, role } from './tokens.schemas';
export { JwtKeys } from './jwt-keys.service';
export { CredentialResolvers } from './credential-resolvers';
export { BearerCredentials } from './bearer-credentials';
export type { CredentialResolver } from './credential-resolvers';
export { BrowserKeys } from './browser-keys.service';
export { BrowserSessions } from './browser-sessions.service';
export { OidcSignIn } from './oidc-sign-in.service';
export { SignInLinks } from './sign-in-links.service';
export { StreamAccess } from './stream-access.service';
export { IdentityProviderSettings, IdentityProviderUrlRefusedError } from './identity-provider-settings.service';
export { guardedWebFetch, idpFetch, IdpFetchError, scrubRemoteText } from './idp-http';
export { Offboarding } from './offboarding.service';
export type { Offboardee, OffboardingContext, OffboardingStep } from './offboarding.service';
export { AuthModule } from './auth.module';
