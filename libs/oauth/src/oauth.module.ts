import { Module } from '@nestjs/common';
import { ClockModule } from '@aileron/clock';
import { ClientDocuments } from './client-documents';
import { OauthAccessTokens } from './oauth-access-tokens.service';
import { OauthClientsController } from './oauth-clients.controller';
import { OauthConsent } from './oauth-consent.service';
import { OauthFastPath } from './oauth-fast-path';
import { OauthGrants } from './oauth-grants.service';
import { OauthInteractionController } from './oauth-interaction.controller';
import { OauthMetadataController } from './oauth-metadata.controller';
import { OauthProvider } from './oauth-provider.service';
import { OauthRepository } from './oauth.repository';
import { OauthSweep } from './oauth-sweep.service';

/** Aileron as the OAuth authorization server of its own MCP endpoints (docs/oauth.md). */
@Module({
  imports: [ClockModule],
  controllers: [OauthMetadataController, OauthInteractionController, OauthClientsController],
  providers: [
    OauthRepository,
    ClientDocuments,
    OauthProvider,
    OauthAccessTokens,
    OauthFastPath,
    OauthGrants,
    OauthConsent,
    OauthSweep,
  ],
  exports: [OauthGrants],
})
export class OauthModule {}
