import type { IncomingMessage, ServerResponse } from 'node:http';
import { Inject, Injectable } from '@nestjs/common';
import { AccessService, Principal, WorkspaceScope } from '@aileron/auth';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { DomainError } from '@aileron/errors';
import { isClientIdUrl } from './domain/client-metadata';
import type { ConsentView } from './domain/pages';
import { MCP_SCOPE, workspaceOfResource } from './domain/resource';
import { OauthGrants } from './oauth-grants.service';
import { OauthProvider } from './oauth-provider.service';
import { OauthRepository } from './oauth.repository';

/** What a person is asked to allow, once everything that could refuse it has been checked. */
export interface ConsentRequest {
  scope: WorkspaceScope;
  view: Omit<ConsentView, 'csrf'>;
  clientId: string;
  clientName: string | null;
  registration: ConsentView['registration'];
  resource: string;
  /** the provider's scopes the client asked for (`openid`, `offline_access`, `mcp`), granted with the resource */
  oidcScopes: string[];
}

/** Why the person cannot allow this request; the message is ours, safe to show and to send back to the client. */
export interface ConsentRefusal {
  refused: string;
}

/** The raw request and response the provider reads its interaction cookie from. */
export interface InteractionExchange {
  req: IncomingMessage;
  res: ServerResponse;
}

/** The interaction this browser is in, or null when it has none, it expired, or it is another one than the page's. */
export type Interaction = Awaited<ReturnType<Awaited<ReturnType<OauthProvider['provider']>>['interactionDetails']>>;

/**
 * The consent step of an authorization request: oidc-provider has checked the
 * client, its redirect URI, PKCE and the resource; this checks the person
 * (signed in to the console, with `mcp.use` in the resource's workspace) and
 * the organisation's rule on dynamically registered clients, then records the
 * consent and hands the provider its result.
 */
@Injectable()
export class OauthConsent {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly provider: OauthProvider,
    private readonly access: AccessService,
    private readonly repository: OauthRepository,
    private readonly grants: OauthGrants,
  ) {}

  async interaction(exchange: InteractionExchange, uid: string): Promise<Interaction | null> {
    const provider = await this.provider.provider();
    try {
      const details = await provider.interactionDetails(exchange.req, exchange.res);
      // the cookie names this browser's interaction: a link to someone else's is not this browser's to answer
      return details.uid === uid ? details : null;
    } catch (error) {
      if ((error as { name?: unknown }).name === 'SessionNotFound') return null;
      throw error;
    }
  }

  async prepare(principal: Principal, interaction: Interaction): Promise<ConsentRequest | ConsentRefusal> {
    const params = interaction.params as Record<string, unknown>;
    const resource = params.resource;
    const workspace = typeof resource === 'string' ? workspaceOfResource(this.config.publicUrl, resource) : null;
    if (typeof resource !== 'string' || workspace === null)
      return { refused: 'The client must ask for exactly one resource: the MCP endpoint of one workspace.' };
    let scope: WorkspaceScope;
    try {
      scope = await this.access.workspace(principal, workspace, 'mcp.use');
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      return {
        refused: `You cannot use the MCP endpoint of workspace "${workspace}" in organisation "${principal.organizationSlug}": it does not exist there, or your role does not allow calling its tools. Ask an admin for access.`,
      };
    }
    const provider = await this.provider.provider();
    const clientId = String(params.client_id);
    const client = await provider.Client.find(clientId);
    if (!client) return { refused: 'The client is not known any more; start again from your MCP client.' };
    const registration = isClientIdUrl(clientId) ? 'metadata_document' : 'dynamic';
    if (registration === 'dynamic' && !(await this.repository.settings(scope)).allowDynamicRegistration)
      return {
        refused: `Organisation "${principal.organizationSlug}" does not accept MCP clients that registered themselves (dynamic registration). Use a client that identifies itself with a Client ID Metadata Document, or ask an admin to allow dynamic registration.`,
      };
    const names = await this.repository.workspaceNames(scope);
    const clientName = typeof client.clientName === 'string' ? client.clientName : null;
    const requested = typeof params.scope === 'string' ? params.scope.split(' ') : [];
    return {
      scope,
      clientId,
      clientName,
      registration,
      resource,
      oidcScopes: requested.filter((s) => s === 'openid' || s === 'offline_access' || s === MCP_SCOPE),
      view: {
        uid: interaction.uid,
        clientName,
        clientId,
        registration,
        redirectUri: String(params.redirect_uri),
        workspace: { slug: scope.workspaceSlug, name: names?.workspace ?? scope.workspaceSlug },
        organization: names?.organization ?? principal.organizationSlug,
        person: principal.name,
        resource,
      },
    };
  }

  /** The person allowed it: a grant for the one resource, recorded as a connected client; where the browser goes next. */
  async allow(principal: Principal, request: ConsentRequest, exchange: InteractionExchange): Promise<string> {
    const provider = await this.provider.provider();
    const grant = new provider.Grant({ accountId: principal.id, clientId: request.clientId });
    grant.addResourceScope(request.resource, MCP_SCOPE);
    if (request.oidcScopes.length > 0) grant.addOIDCScope(request.oidcScopes);
    const grantId = await grant.save();
    await this.grants.connect(principal, request.scope, {
      grantId,
      clientId: request.clientId,
      clientName: request.clientName,
      registration: request.registration,
      resource: request.resource,
      scope: MCP_SCOPE,
    });
    return provider.interactionResult(
      exchange.req,
      exchange.res,
      { login: { accountId: principal.id }, consent: { grantId } },
      { mergeWithLastSubmission: false },
    );
  }

  /** The client hears `access_denied`, with why. */
  async deny(exchange: InteractionExchange, why: string): Promise<string> {
    const provider = await this.provider.provider();
    return provider.interactionResult(
      exchange.req,
      exchange.res,
      { error: 'access_denied', error_description: why },
      { mergeWithLastSubmission: false },
    );
  }
}
