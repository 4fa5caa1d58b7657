import { Injectable } from '@nestjs/common';
import { z } from 'zod';
import { AuditService } from '@aileron/audit';
import type { WorkspaceScope } from '@aileron/auth';
import { CatalogService } from '@aileron/catalog';
import { Clock } from '@aileron/clock';
import { digestOf } from '@aileron/crypto';
import { DomainError, fieldIssues, ValidationError } from '@aileron/errors';
import { CursorKey, InvalidCursorError, ListCursor, PageQuery } from '@aileron/http';
import { parsePolicyDocument } from './domain/policy-document';
import { compilePolicy } from './domain/policy-engine';
import { REPLAY_MAX_DAYS, REPLAY_SCAN_LIMIT, ReplayDifference, replayCalls } from './domain/policy-replay';
import { PolicyInvalidError, PolicyService } from './policy.service';

const DAY_MS = 86_400_000;

/** What a replay's cursor holds: the range the first page fixed, the draft it ran, and where it stopped. */
interface ReplayKey {
  since: Date;
  until: Date;
  /** the start of the draft's digest: a cursor does not continue another draft's replay */
  draft: string;
  after: { occurredAt: Date; seq: number };
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const replayKey: CursorKey<ReplayKey> = {
  toParts: (key) => [
    key.since.toISOString(),
    key.until.toISOString(),
    key.draft,
    key.after.occurredAt.toISOString(),
    key.after.seq,
  ],
  fromParts: (parts) => {
    const [since, until, draft, at, seq] = parts;
    if (
      parts.length !== 5 ||
      typeof since !== 'string' ||
      !ISO.test(since) ||
      typeof until !== 'string' ||
      !ISO.test(until) ||
      typeof draft !== 'string' ||
      !/^[0-9a-f]{16}$/.test(draft) ||
      typeof at !== 'string' ||
      !ISO.test(at) ||
      !Number.isSafeInteger(seq)
    )
      return undefined;
    return {
      since: new Date(since),
      until: new Date(until),
      draft,
      after: { occurredAt: new Date(at), seq: seq as number },
    };
  },
};
const replayCursor = new ListCursor('policy-replay', replayKey);

const replayInput = z
  .object({
    document: z.unknown().refine((value) => value !== undefined, 'is required'),
    since: z.iso.datetime({ offset: true, error: 'must be an ISO-8601 date-time with a time zone' }),
  })
  .strict();

export interface ReplayPage {
  differences: ReplayDifference[];
  nextCursor: string | null;
  since: Date;
  until: Date;
  /** recorded calls this page decided again */
  examined: number;
}

/** A `since` further back than a replay may reach. */
export class ReplayWindowTooLongError extends DomainError {
  constructor() {
    super(
      'REPLAY_WINDOW_TOO_LONG',
      `body.since: a replay reaches at most ${REPLAY_MAX_DAYS} days back; give a later since`,
      {
        extensions: {
          errors: [{ path: 'body.since', message: `must be within the last ${REPLAY_MAX_DAYS} days` }],
          max_days: REPLAY_MAX_DAYS,
        },
      },
    );
  }
}

/**
 * A draft policy run against the workspace's recorded calls (the audit log's
 * call records) before it is published: which of them it would decide
 * otherwise. Bounded like any read a person can start: `since` at most
 * REPLAY_MAX_DAYS back, REPLAY_SCAN_LIMIT calls decided per request, and a
 * cursor that continues in the range and draft the first page fixed.
 */
@Injectable()
export class PolicyReplay {
  constructor(
    private readonly policies: PolicyService,
    private readonly audit: AuditService,
    private readonly clock: Clock,
    private readonly catalog: CatalogService,
  ) {}

  async replay(scope: WorkspaceScope, body: unknown, page: PageQuery): Promise<ReplayPage> {
    const input = replayInput.safeParse(body);
    if (!input.success) throw new ValidationError(fieldIssues('body', input.error.issues));
    const parsed = parsePolicyDocument(input.data.document);
    if (!parsed.ok)
      throw new PolicyInvalidError(
        parsed.problems.map((p) => ({
          ...p,
          path: p.path === '' || p.path.startsWith('[') ? `document${p.path}` : `document.${p.path}`,
        })),
      );
    const since = new Date(input.data.since);
    const now = this.clock.now();
    if (since.getTime() > now)
      throw new ValidationError([{ path: 'body.since', message: 'must not be in the future' }]);
    if (since.getTime() < now - REPLAY_MAX_DAYS * DAY_MS) throw new ReplayWindowTooLongError();

    const draft = digestOf(parsed.document).slice(0, 16);
    const resumed = page.cursor !== undefined ? replayCursor.decode(page.cursor) : undefined;
    // a cursor continues the replay it came from: the same since and the same draft
    if (resumed && (resumed.since.getTime() !== since.getTime() || resumed.draft !== draft))
      throw new InvalidCursorError();
    const until = resumed?.until ?? new Date(now);

    const current = await this.policies.current(scope);
    const compiled = compilePolicy(parsed.document, { defaultEffect: current.workspaceDefault });
    const read = await this.audit.recordedCalls(scope, {
      from: since,
      to: until,
      ...(resumed ? { after: resumed.after } : {}),
      limit: REPLAY_SCAN_LIMIT,
    });
    const differences = replayCalls(compiled, read.calls, await this.catalog.toolPrefixes(scope));
    const cursorAt = (after: { occurredAt: Date; seq: number }) => replayCursor.encode({ since, until, draft, after });
    if (differences.length > page.limit) {
      // a full page: the next one starts after its last call, and decides what follows again
      const shown = differences.slice(0, page.limit);
      const last = shown[shown.length - 1]!.call;
      return {
        differences: shown,
        nextCursor: cursorAt({ occurredAt: last.occurredAt, seq: last.seq }),
        since,
        until,
        examined: read.calls.findIndex((c) => c.seq === last.seq) + 1,
      };
    }
    return {
      differences,
      // as many read as allowed: more may follow
      nextCursor: read.read === REPLAY_SCAN_LIMIT && read.last ? cursorAt(read.last) : null,
      since,
      until,
      examined: read.calls.length,
    };
  }
}
