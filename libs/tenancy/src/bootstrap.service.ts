import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Injectable, Logger } from '@nestjs/common';
import { TokensService } from '@aileron/auth';
import { SystemScopes } from '@aileron/auth/scope-issuer';
import { ADMIN_TOKEN_FILE } from '@aileron/config';
import { DatabaseService } from '@aileron/database';
import { ConflictError } from '@aileron/errors';
import { TenancyRepository } from './tenancy.repository';
import { TenancyService } from './tenancy.service';

export interface BootstrapResult {
  created: boolean;
  tokenPath: string;
  /** set when a token was written this time */
  reissued: boolean;
}

/**
 * First start: the tenant, workspace and owner token a single developer needs,
 * with no setup. Idempotent across restarts: the organisation is the marker,
 * and the token file is written after the commit, so a crash in between only
 * means a fresh token is minted next time.
 */
const BOOTSTRAP = SystemScopes.system('bootstrap');

@Injectable()
export class BootstrapService {
  private readonly logger = new Logger('Bootstrap');

  constructor(
    private readonly db: DatabaseService,
    private readonly tenancy: TenancyService,
    private readonly repository: TenancyRepository,
    private readonly tokens: TokensService,
  ) {}

  async ensureEmbeddedDefaults(dataDir: string): Promise<BootstrapResult> {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const tokenPath = join(dataDir, ADMIN_TOKEN_FILE);
    const existing = await this.repository.findOrganizationBySlug(BOOTSTRAP, 'default');
    if (!existing) {
      const { token } = await this.tenancy.createOrganization(
        { slug: 'default', name: 'Default' },
        'system:bootstrap',
        {
          platformOperator: true,
          // one developer on one machine is never blocked by a policy nobody wrote
          defaultWorkspace: { policyDefault: 'allow' },
        },
      );
      writeSecretFile(tokenPath, token);
      return { created: true, tokenPath, reissued: true };
    }
    if (existsSync(tokenPath) && readFileSync(tokenPath, 'utf8').trim().length > 0) {
      chmodSync(tokenPath, 0o600);
      return { created: false, tokenPath, reissued: false };
    }
    this.logger.warn(`${tokenPath} is missing; issuing a new owner token`);
    const { token } = await this.db.transaction((tx) =>
      this.tokens.mint(
        SystemScopes.organization(existing.id),
        {
          name: 'owner (re-issued)',
          role: 'owner',
          workspaceId: null,
          expiresAt: null,
          createdBy: 'system:bootstrap',
          platformOperator: true,
        },
        tx,
      ),
    );
    writeSecretFile(tokenPath, token);
    return { created: false, tokenPath, reissued: true };
  }

  /** Server mode's first organisation, made once by `aileron-cp bootstrap`. */
  async bootstrapServer(slug: string, name: string): Promise<{ organization: string; token: string }> {
    if ((await this.repository.countOrganizations(BOOTSTRAP)) > 0) {
      throw new ConflictError(
        'ALREADY_BOOTSTRAPPED',
        'This installation already has an organisation; create more with POST /v1/organizations',
      );
    }
    const created = await this.tenancy.createOrganization({ slug, name }, 'system:bootstrap', {
      platformOperator: true,
      defaultWorkspace: { policyDefault: 'deny' },
    });
    return { organization: created.organization.slug, token: created.token };
  }
}

function writeSecretFile(path: string, content: string): void {
  mkdirSync(join(path, '..'), { recursive: true, mode: 0o700 });
  writeFileSync(path, content + '\n', { mode: 0o600 });
  chmodSync(path, 0o600); // an existing file keeps its old mode on write
}
