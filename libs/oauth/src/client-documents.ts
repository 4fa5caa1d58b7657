import { Inject, Injectable, Logger } from '@nestjs/common';
import type { AdapterPayload } from 'oidc-provider';
import { idpFetch, IdpFetchError } from '@aileron/auth';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { Clock } from '@aileron/clock';
import { outboundPolicyOf } from '@aileron/net';
import { clientIdUrlProblem, clientMetadataDocumentProblem, isClientIdUrl } from './domain/client-metadata';

/** The draft's guidance: a document is a few hundred bytes; anything large is not one */
const DOCUMENT_LIMITS = { timeoutMs: 5_000, maxBytes: 5 * 1024 };
/** how long a replica reuses a document it fetched: a client's change shows within this */
const CACHE_MS = 5 * 60_000;
const CACHE_ENTRIES = 200;

/** A client_id whose metadata document cannot be used; the reason is safe to show (it is ours, never the remote's text). */
export class ClientDocumentError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'ClientDocumentError';
  }
}

/**
 * Client ID Metadata Documents, fetched: a client whose id is an https URL
 * is registered by the JSON document at that URL. The fetch follows the
 * control plane's outbound rules (SSRF checks on every address, no redirects,
 * 5 KiB, 5 s); the document is checked by the domain's rules and then by
 * oidc-provider's client schema. Each replica keeps what it fetched for five
 * minutes: a cache of public documents, never the only copy of anything.
 */
@Injectable()
export class ClientDocuments {
  private readonly logger = new Logger('ClientDocuments');
  private readonly cache = new Map<string, { payload: AdapterPayload; until: number }>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clock: Clock,
  ) {}

  /** undefined: the id is not a URL, so not ours to resolve. */
  async resolve(id: string): Promise<AdapterPayload | undefined> {
    if (!isClientIdUrl(id)) return undefined;
    const rules = { allowHttpLoopback: this.config.oauth.httpClientIds };
    const refused = clientIdUrlProblem(id, rules);
    if (refused) throw new ClientDocumentError(`The client_id ${refused}`);
    const now = this.clock.now();
    const cached = this.cache.get(id);
    if (cached && cached.until > now) return cached.payload;
    const document = await this.fetch(id);
    const problem = clientMetadataDocumentProblem(id, document, rules);
    if (problem) throw new ClientDocumentError(`The client's metadata document ${problem}`);
    const payload = { token_endpoint_auth_method: 'none', ...(document as object) } as AdapterPayload;
    if (this.cache.size >= CACHE_ENTRIES) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(id, { payload, until: now + CACHE_MS });
    return payload;
  }

  private async fetch(id: string): Promise<unknown> {
    const host = new URL(id).host;
    try {
      const answer = await idpFetch(
        id,
        { headers: { accept: 'application/json' } },
        outboundPolicyOf(this.config),
        DOCUMENT_LIMITS,
      );
      if (answer.status !== 200)
        throw new ClientDocumentError(
          `The client's metadata document at ${host} could not be read (HTTP ${answer.status})`,
        );
      return JSON.parse(answer.body.toString('utf8'));
    } catch (error) {
      if (error instanceof ClientDocumentError) throw error;
      const reason = error instanceof IdpFetchError ? error.reason : 'it is not JSON';
      this.logger.warn({ host, reason }, `could not read a client's metadata document: ${reason}`);
      throw new ClientDocumentError(`The client's metadata document at ${host} could not be read: ${reason}`);
    }
  }
}
