import { Global, Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { PassportModule } from '@nestjs/passport';
import { ClockModule } from '@aileron/clock';
import { AccessService } from './access.service';
import { AuthGuard } from './auth.guard';
import { BearerCredentials } from './bearer-credentials';
import { AuthRepository } from './auth.repository';
import { BrowserKeys } from './browser-keys.service';
import { BrowserSessions } from './browser-sessions.service';
import { BrowserSessionController } from './browser-session.controller';
import { CredentialResolvers } from './credential-resolvers';
import { IdentityProviderSettings } from './identity-provider-settings.service';
import { JwtKeys } from './jwt-keys.service';
import { JwtStrategy } from './jwt.strategy';
import { MeController } from './me.controller';
import { OidcSignIn } from './oidc-sign-in.service';
import { OidcController } from './oidc.controller';
import { Offboarding } from './offboarding.service';
import { PrincipalCache } from './principal-cache.service';
import { PrincipalResolver } from './principal.resolver';
import { SignInLinks } from './sign-in-links.service';
import { StreamAccess } from './stream-access.service';
import { TokensController } from './tokens.controller';
import { TokensService } from './tokens.service';

@Global()
@Module({
  imports: [ClockModule, PassportModule],
  controllers: [MeController, TokensController, OidcController, BrowserSessionController],
  providers: [
    CredentialResolvers,
    BearerCredentials,
    AuthRepository,
    JwtKeys,
    PrincipalCache,
    PrincipalResolver,
    JwtStrategy,
    AccessService,
    TokensService,
    BrowserKeys,
    BrowserSessions,
    OidcSignIn,
    SignInLinks,
    StreamAccess,
    IdentityProviderSettings,
    Offboarding,
    { provide: APP_GUARD, useClass: AuthGuard },
  ],
  exports: [
    AccessService,
    BearerCredentials,
    PrincipalCache,
    PrincipalResolver,
    TokensService,
    JwtKeys,
    CredentialResolvers,
    BrowserKeys,
    BrowserSessions,
    OidcSignIn,
    SignInLinks,
    StreamAccess,
    IdentityProviderSettings,
    Offboarding,
  ],
})
export class AuthModule {}
