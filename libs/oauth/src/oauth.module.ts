import { Module } from '@nestjs/common';
import { ClockModule } from '@aileron/clock';
import { ClientDocuments } from './client-documents';
import { OAuthAccessTokens } from './oauth-access-tokens.service';
import { OAuthClientsController } from './oauth-clients.controller';
import { OAuthConsent } from './oauth-consent.service';
import { OAuthFastPath } from './oauth-fast-path';
import { OAuthGrants } from './oauth-grants.service';
import { OAuthInteractionController } from './oauth-interaction.controller';
import { OAuthMetadataController } from './oauth-metadata.controller';
import { OAuthProvider } from './oauth-provider.service';
import { OAuthRepository } from './oauth.repository';
import { OAuthSweep } from './oauth-sweep.service';

/** Aileron as the OAuth authorization server of its own MCP endpoints (docs/oauth.md). */
@Module({
  imports: [ClockModule],
  controllers: [OAuthMetadataController, OAuthInteractionController, OAuthClientsController],
  providers: [
    OAuthRepository,
    ClientDocuments,
    OAuthProvider,
    OAuthAccessTokens,
    OAuthFastPath,
    OAuthGrants,
    OAuthConsent,
    OAuthSweep,
  ],
  exports: [OAuthGrants],
})
export class OAuthModule {}
