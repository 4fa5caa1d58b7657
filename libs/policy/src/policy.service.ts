import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { describePrincipal, Principal, WorkspaceScope } from '@aileron/auth';
import { MESSAGE_BUS, MessageBus, SharedCache } from '@aileron/bus';
import { Clock } from '@aileron/clock';
import { digestOf } from '@aileron/crypto';
import { DatabaseService, isDatabaseUnavailable, isUniqueViolation, Keyset } from '@aileron/database';
import { ConflictError, DomainError, fieldPath, NotFoundError } from '@aileron/errors';
import { OutboxService } from '@aileron/outbox';
import { TenancyService } from '@aileron/tenancy';
import { diffPolicies, PolicyDiff } from './domain/policy-diff';
import { DefaultEffect, parsePolicyDocument, PolicyDocument, PolicyProblem } from './domain/policy-document';
import { CompiledPolicy, PolicyCall, PolicyDecision } from './domain/policy-engine';
import { SharedPolicies } from './domain/shared-policies';
import { PolicyRepository, PolicyVersionRecord, PolicyVersionSummary } from './policy.repository';

/** The policy in force in one workspace, compiled once per version. */
export interface CurrentPolicy {
  /** 0 until the first document is written */
  version: number;
  document: PolicyDocument;
  digest: string;
  /** the workspace's default, used when the document names none */
  workspaceDefault: DefaultEffect;
  compiled: CompiledPolicy;
  createdAt: Date | null;
  createdBy: string | null;
}

const EMPTY: PolicyDocument = { rules: [] };
const CACHE_TTL_MS = 30_000;

/** Every problem of the document at once, each field named as in any 400 (`body.rules[2].effect`) with its rule's id. */
export class PolicyInvalidError extends DomainError {
  constructor(problems: PolicyProblem[]) {
    const errors = problems.map((p) => ({ ...p, path: fieldPath('body', p.path) }));
    super(
      'POLICY_INVALID',
      errors
        .slice(0, 5)
        .map((p) => `${p.path}${p.rule ? ` [rule ${p.rule}]` : ''}: ${p.message}`)
        .join('; ') + (errors.length > 5 ? `; and ${errors.length - 5} more` : ''),
      { extensions: { errors } },
    );
  }
}

function validDocument(input: unknown): PolicyDocument {
  const parsed = parsePolicyDocument(input);
  if (!parsed.ok) throw new PolicyInvalidError(parsed.problems);
  return parsed.document;
}

@Injectable()
export class PolicyService implements OnModuleDestroy {
  private readonly cache: SharedCache<CurrentPolicy>;
  /** workspaces enforcing the same document share its compiled index */
  private readonly policies = new SharedPolicies();

  constructor(
    private readonly db: DatabaseService,
    private readonly repository: PolicyRepository,
    private readonly tenancy: TenancyService,
    private readonly outbox: OutboxService,
    @Inject(MESSAGE_BUS) bus: MessageBus,
    clock: Clock,
  ) {
    this.cache = new SharedCache(bus, 'policy', CACHE_TTL_MS, clock, { staleIfError: isDatabaseUnavailable });
  }

  onModuleDestroy(): void {
    this.cache.close();
  }

  /** What the engine enforces now; served from memory on the hot path. */
  current(scope: WorkspaceScope): Promise<CurrentPolicy> {
    return this.cache.getOrLoad(cacheKey(scope), async () => {
      const [latest, workspace] = await Promise.all([this.repository.latest(scope), this.tenancy.getWorkspace(scope)]);
      const source = latest?.document ?? EMPTY;
      const digest = latest?.digest ?? digestOf(source);
      const { document, compiled } = this.policies.of(digest, source, workspace.policyDefault);
      return {
        version: latest?.version ?? 0,
        document,
        digest,
        workspaceDefault: workspace.policyDefault,
        compiled,
        createdAt: latest?.createdAt ?? null,
        createdBy: latest?.createdBy ?? null,
      };
    });
  }

  /** The cached policy, if this replica holds a fresh one; for synchronous fast paths. */
  peek(scope: WorkspaceScope): CurrentPolicy | undefined {
    return this.cache.get(cacheKey(scope));
  }

  /** Validates and stores a new version; the same document again changes nothing. */
  async replace(
    principal: Principal,
    scope: WorkspaceScope,
    input: unknown,
  ): Promise<{ policy: CurrentPolicy; changed: boolean }> {
    return this.write(principal, scope, validDocument(input), null);
  }

  /** What a save of the document would answer, without saving: its problems, or whether it differs from the one in force. */
  async validate(scope: WorkspaceScope, input: unknown): Promise<{ rules: number; digest: string; changed: boolean }> {
    const document = validDocument(input);
    const digest = digestOf(document);
    const current = await this.current(scope);
    // as write() decides: before the first version, any document is a change
    return { rules: document.rules.length, digest, changed: current.version === 0 || digest !== current.digest };
  }

  /** Versions only go forward: the old document comes back as a new version. */
  async rollback(
    principal: Principal,
    scope: WorkspaceScope,
    version: number,
  ): Promise<{ policy: CurrentPolicy; changed: boolean }> {
    const old = await this.repository.get(scope, version);
    if (!old) throw new NotFoundError('policy version', String(version), 'POLICY_VERSION_NOT_FOUND');
    return this.write(principal, scope, old.document, version);
  }

  async evaluate(scope: WorkspaceScope, call: PolicyCall): Promise<PolicyDecision & { policy_version: number }> {
    const policy = await this.current(scope);
    return { ...policy.compiled.evaluate(call), policy_version: policy.version };
  }

  versions(scope: WorkspaceScope, page: Keyset<number>): Promise<PolicyVersionSummary[]> {
    return this.repository.list(scope, page);
  }

  async version(scope: WorkspaceScope, version: number): Promise<PolicyVersionRecord> {
    const record = await this.repository.get(scope, version);
    if (!record) throw new NotFoundError('policy version', String(version), 'POLICY_VERSION_NOT_FOUND');
    return record;
  }

  async diff(scope: WorkspaceScope, from: number, to: number): Promise<PolicyDiff> {
    const [before, after] = await Promise.all([this.documentAt(scope, from), this.documentAt(scope, to)]);
    return diffPolicies(before, after);
  }

  private async documentAt(scope: WorkspaceScope, version: number): Promise<PolicyDocument> {
    // version 0 is the empty policy every workspace starts with
    return version === 0 ? EMPTY : (await this.version(scope, version)).document;
  }

  private async write(
    principal: Principal,
    scope: WorkspaceScope,
    document: PolicyDocument,
    restoredFrom: number | null,
  ): Promise<{ policy: CurrentPolicy; changed: boolean }> {
    const digest = digestOf(document);
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        const written = await this.db.transaction(async (tx) => {
          const latest = await this.repository.latest(scope, tx);
          if (latest?.digest === digest) return null;
          const version = (latest?.version ?? 0) + 1;
          const record = await this.repository.create(
            scope,
            { version, document, digest, restoredFrom, createdBy: describePrincipal(principal) },
            tx,
          );
          await this.outbox.record(tx, {
            topic: 'policy.updated',
            organizationId: scope.organizationId,
            workspaceId: scope.workspaceId,
            payload: {
              workspace: scope.workspaceSlug,
              version,
              digest,
              rules: document.rules.length,
              restored_from: restoredFrom,
              actor: describePrincipal(principal),
            },
          });
          return record;
        });
        if (written) await this.cache.invalidate(cacheKey(scope));
        return { policy: await this.current(scope), changed: written !== null };
      } catch (error) {
        // two writers raced for the same version number: the later one goes on top
        if (!isUniqueViolation(error)) throw error;
      }
    }
    throw new ConflictError(
      'POLICY_WRITE_CONFLICT',
      'The policy is being changed by others at the same time; try again',
    );
  }
}

function cacheKey(scope: WorkspaceScope): string {
  return `${scope.organizationId}:${scope.workspaceId}`;
}
