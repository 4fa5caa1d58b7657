import { Injectable } from '@nestjs/common';
import type { Principal, WorkspaceScope } from '@aileron/auth';
import { CatalogService } from '@aileron/catalog';
import { DomainError, NotFoundError } from '@aileron/errors';
import { VaultService } from '@aileron/vault';
import { localSecretPaths, versionSeenBy } from './bundles.service';

export interface DeliveredSecret {
  ref: string;
  path: string;
  version: number;
  value: string;
}

/**
 * The values of a local server's `vault://` references, for the gateway that
 * starts it (the hybrid ADR: "resolved from the vault at gateway startup and
 * injected as environment variables"). Only for a server of the gateway's own
 * workspace, at the version its catalog gives it, and only secrets their
 * writer marked deliverable; each value read is audited, naming the gateway.
 */
@Injectable()
export class GatewaySecretsService {
  constructor(
    private readonly catalog: CatalogService,
    private readonly vault: VaultService,
  ) {}

  async resolve(
    gateway: Principal,
    scope: WorkspaceScope,
    server: string,
    version: string,
  ): Promise<{ server: string; version: string; secrets: DeliveredSecret[] }> {
    const assignment = (await this.catalog.workspaceServers(scope)).find((a) => a.name === server);
    // unknown, in another workspace or only in the catalog: the same answer, so nothing tells them apart
    if (!assignment) throw new NotFoundError('server', server, 'GATEWAY_SERVER_NOT_FOUND');
    const seen = versionSeenBy(assignment, gateway).version;
    if (seen.version !== version) {
      // the version its own catalog gives it, and nothing about what else exists
      throw new DomainError(
        'GATEWAY_SERVER_VERSION_MISMATCH',
        `This gateway runs ${server}@${seen.version}, not ${version}: ask for the version its catalog gives it`,
        { extensions: { server, version: seen.version } },
      );
    }
    if (!assignment.enabled)
      throw new DomainError(
        'GATEWAY_SERVER_DISABLED',
        `${server} is switched off for the organisation${assignment.disabledReason ? `: ${assignment.disabledReason}` : ''}`,
      );
    if (seen.definition.mode !== 'local')
      throw new DomainError(
        'GATEWAY_SERVER_NOT_LOCAL',
        `${server} is a remote server: its credentials stay in the control plane, which runs it`,
      );
    const paths = localSecretPaths(seen);
    const values = await this.vault.deliverToGateway(scope, paths, {
      gatewayId: gateway.id,
      server,
      serverVersion: version,
    });
    return {
      server,
      version,
      secrets: values.map((v) => ({ ref: `vault://${v.path}`, path: v.path, version: v.version, value: v.value })),
    };
  }
}
