import { Command, InvalidArgumentError } from 'commander';
import { ApiClient, ApiOptions } from './api-client';
import { withApiOptions } from './api-commands';
import { note, out, printJson, printTable, when } from './output';

interface ApprovalView {
  id: string;
  status: string;
  requester: string;
  requested_by: string;
  session: string | null;
  server: string;
  tool: string;
  rules: string[];
  route: string;
  quorum: number;
  decisions: { approver: string; decision: 'approve' | 'deny'; reason: string | null; via: string; at: string }[];
  expires_at: string;
  created_at: string;
  consumed_at: string | null;
  reason: string | null;
  review_url: string;
}

type WorkspaceOption = ApiOptions & { workspace: string };

const STATUSES = ['pending', 'approved', 'denied', 'expired', 'cancelled'];
const WATCH_EVERY_MS = 2_000;

function status(value: string): string {
  if (!STATUSES.includes(value)) throw new InvalidArgumentError(`must be one of ${STATUSES.join(', ')}.`);
  return value;
}

function inbox(options: WorkspaceOption, status?: string): string {
  const query = new URLSearchParams(status ? { status } : {});
  return `/v1/workspaces/${encodeURIComponent(options.workspace)}/approvals?${query}`;
}

function approvalCount(decisions: ApprovalView['decisions']): number {
  return new Set(decisions.filter((d) => d.decision === 'approve').map((d) => d.approver)).size;
}

/** One line per request, for `watch`: what is asked, by whom, and where to decide. */
function summary(r: ApprovalView): string {
  return `${r.id}  ${r.server}/${r.tool} for ${r.requester} (rule ${r.rules.join(', ') || '-'}; ${r.quorum} approval${r.quorum > 1 ? 's' : ''} needed; expires ${when(r.expires_at)})  ${r.review_url}`;
}

export function addApprovalsCommand(parent: Command): void {
  const group = parent.command('approvals').description("see a workspace's approval requests and decide them");

  withApiOptions(
    group
      .command('list')
      .description('approval requests of a workspace, newest first')
      .requiredOption('--workspace <slug>', 'the workspace')
      .option('--status <status>', `only these: ${STATUSES.join(', ')}`, status),
  ).action(async (options: WorkspaceOption & { status?: string }) => {
    const list = await ApiClient.from(options).all<ApprovalView>(inbox(options, options.status));
    if (options.json) return printJson({ approvals: list });
    if (list.length === 0) return out(`no ${options.status ? `${options.status} ` : ''}approval requests`);
    printTable(
      ['id', 'status', 'call', 'requester', 'rules', 'route', 'approvals', 'expires', 'created'],
      list.map((r) => [
        r.id,
        r.status + (r.consumed_at ? ' (used)' : ''),
        `${r.server}/${r.tool}`,
        r.requester,
        r.rules.join(','),
        r.route,
        `${approvalCount(r.decisions)}/${r.quorum}`,
        when(r.expires_at),
        when(r.created_at),
      ]),
    );
  });

  for (const decision of ['approve', 'deny'] as const) {
    withApiOptions(
      group
        .command(decision)
        .description(
          decision === 'approve'
            ? 'approve a request: with the quorum reached, the exact call may run once'
            : 'deny a request: final, whatever others decided',
        )
        .argument('<id>', 'the request id (see approvals list)')
        .option('--reason <text>', 'why, for the record and the requester'),
    ).action(async (id: string, options: ApiOptions & { reason?: string }) => {
      const decided = await ApiClient.from(options).post<ApprovalView>(
        `/v1/approvals/${encodeURIComponent(id)}/${decision}`,
        {
          ...(options.reason !== undefined ? { reason: options.reason } : {}),
          channel: 'cli',
        },
      );
      if (options.json) return printJson(decided);
      const call = `${decided.server}/${decided.tool} for ${decided.requester}`;
      if (decided.status === 'approved')
        out(`approved ${decided.id}: ${call} may run once, until ${when(decided.expires_at)}`);
      else if (decided.status === 'denied') out(`denied ${decided.id}: ${call}`);
      else
        out(
          `recorded your approval of ${decided.id} (${call}): ${approvalCount(decided.decisions)} of ${decided.quorum} approvals, still ${decided.status}`,
        );
    });
  }

  withApiOptions(
    group
      .command('watch')
      .description('print pending requests with their review URL as they arrive, until interrupted')
      .requiredOption('--workspace <slug>', 'the workspace')
      .option('--once', 'print the requests pending now and exit'),
  ).action(async (options: WorkspaceOption & { once?: boolean }) => {
    const client = ApiClient.from(options);
    const show = (r: ApprovalView) => (options.json ? out(JSON.stringify(r)) : out(summary(r)));
    // the first look fails loudly (a wrong token or URL); later ones ride out a restart
    const first = await client.all<ApprovalView>(inbox(options, 'pending'));
    for (const r of [...first].reverse()) show(r);
    if (options.once) {
      if (first.length === 0) note(`no pending approval requests in workspace ${options.workspace}`);
      return;
    }

    note(
      `watching workspace ${options.workspace} for approval requests every ${WATCH_EVERY_MS / 1000} s (Ctrl-C to stop)`,
    );
    let seen = new Set(first.map((r) => r.id));
    let running = true;
    let timer: NodeJS.Timeout | undefined;
    let wake: () => void = () => undefined;
    // Ctrl-C ends the watch as a success: stopping is how it is meant to end
    const interrupt = (): void => {
      running = false;
      clearTimeout(timer);
      wake();
    };
    process.once('SIGINT', interrupt);
    process.once('SIGTERM', interrupt);
    let failing = false;
    while (running) {
      await new Promise<void>((resolve) => {
        wake = resolve;
        timer = setTimeout(resolve, WATCH_EVERY_MS);
      });
      if (!running) break;
      try {
        const pending = await client.all<ApprovalView>(inbox(options, 'pending'));
        if (failing) note('reachable again');
        failing = false;
        // oldest first, so the terminal reads in the order requests came in
        for (const r of [...pending].reverse()) if (!seen.has(r.id)) show(r);
        // decided and expired requests never come back as pending: only the current ones need remembering
        seen = new Set(pending.map((r) => r.id));
      } catch (error) {
        if (!failing) note(`${error instanceof Error ? error.message : String(error)}; still trying`);
        failing = true;
      }
    }
  });
}
