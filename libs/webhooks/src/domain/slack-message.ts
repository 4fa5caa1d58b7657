import type { PublicEvent } from '@aileron/outbox';

/**
 * A Slack incoming-webhook body (`{text, blocks}`) summarising an event.
 * `text` is the notification and screen-reader line; `blocks` the message.
 * Slack renders `&`, `<` and `>` as markup, so every value from the event is
 * escaped: an event must not be able to inject links or mentions
 * (`<!channel>`) into a channel.
 */
export interface SlackMessage {
  text: string;
  blocks: SlackBlock[];
}

type Text = { type: 'plain_text'; text: string; emoji?: boolean } | { type: 'mrkdwn'; text: string };
export type SlackBlock =
  | { type: 'header'; text: Text }
  | { type: 'section'; text?: Text; fields?: Text[] }
  | {
      type: 'actions';
      elements: { type: 'button'; text: Text; url: string; style?: 'primary' | 'danger'; action_id: string }[];
    }
  | { type: 'context'; elements: Text[] };

// Block Kit limits: header 150 characters, a field 2000, at most 10 fields, a button's label 75 and its URL 3000
const HEADER_MAX = 150;
const FIELD_MAX = 2000;
const FIELDS_MAX = 10;
const URL_MAX = 3000;

const TITLES: Record<string, string> = {
  'approval.requested': 'Approval requested',
  'approval.routed': 'Approval requested',
  'approval.approved': 'Approval granted',
  'approval.denied': 'Approval denied',
  'approval.expired': 'Approval expired',
  'policy.updated': 'Policy updated',
  'execution.started': 'Execution started',
  'execution.succeeded': 'Execution succeeded',
  'execution.failed': 'Execution failed',
  'secret.read': 'Secret read',
  'session.started': 'Session started',
  'session.ended': 'Session ended',
  'sandbox.snapshot': 'Sandbox snapshot',
  'sandbox.snapshot_failed': 'Sandbox snapshot failed',
  'webhook.paused': 'Webhook paused',
};

export function slackMessage(event: PublicEvent): SlackMessage {
  // `approval.routed` is the same request, posted to a channel its route names
  return event.type === 'approval.requested' || event.type === 'approval.routed'
    ? approvalRequested(event)
    : generic(event);
}

function approvalRequested(event: PublicEvent): SlackMessage {
  const data = event.data;
  const server = text(data.server) ?? 'unknown server';
  const tool = text(data.tool) ?? 'unknown tool';
  const requester = text(data.requester) ?? text(data.requested_by) ?? 'unknown';
  const rule = ruleOf(data);
  const reviewUrl = httpUrl(data.review_url);
  const where = event.workspace ? ` in ${event.workspace}` : '';
  const fields = [
    field('Server', server),
    field('Tool', tool),
    field('Requester', requester),
    field('Rule', rule ?? '—'),
  ];
  if (event.workspace) fields.push(field('Workspace', event.workspace));
  const expires = text(data.expires_at);
  if (expires) fields.push(field('Expires', expires));
  const deciders = whoDecides(data);
  if (deciders) fields.push(field('Who decides', deciders));
  const blocks: SlackBlock[] = [
    header(TITLES[event.type]!),
    {
      type: 'section',
      text: {
        type: 'mrkdwn',
        text: `*${escape(requester)}* wants to call \`${escape(tool)}\` on \`${escape(server)}\`${escape(where)}.`,
      },
    },
    { type: 'section', fields },
  ];
  if (reviewUrl) {
    blocks.push({
      type: 'actions',
      elements: [
        {
          type: 'button',
          text: { type: 'plain_text', text: 'Review' },
          url: reviewUrl,
          style: 'primary',
          action_id: 'aileron_review',
        },
      ],
    });
  }
  blocks.push(context(event));
  return { text: escape(`Approval requested: ${requester} wants ${server}/${tool}${where}`), blocks };
}

function generic(event: PublicEvent): SlackMessage {
  const title = TITLES[event.type] ?? event.type;
  const fields: Text[] = [];
  if (event.workspace) fields.push(field('Workspace', event.workspace));
  for (const [key, value] of Object.entries(event.data)) {
    if (fields.length >= FIELDS_MAX) break;
    if (key === 'actor' || key === 'review_url') continue;
    const shown = scalar(value);
    if (shown !== null) fields.push(field(key, shown));
  }
  const blocks: SlackBlock[] = [header(title)];
  if (fields.length > 0) blocks.push({ type: 'section', fields });
  const link = httpUrl(event.data.review_url);
  if (link)
    blocks.push({
      type: 'actions',
      elements: [{ type: 'button', text: { type: 'plain_text', text: 'Open' }, url: link, action_id: 'aileron_open' }],
    });
  blocks.push(context(event));
  const actor = text(event.data.actor);
  return {
    text: escape(`${title}${event.workspace ? ` in ${event.workspace}` : ''}${actor ? ` by ${actor}` : ''}`),
    blocks,
  };
}

function header(title: string): SlackBlock {
  return { type: 'header', text: { type: 'plain_text', text: clip(title, HEADER_MAX), emoji: false } };
}

function context(event: PublicEvent): SlackBlock {
  const actor = text(event.data.actor);
  const parts = [`\`${escape(event.type)}\``, escape(event.id), escape(event.time)];
  if (actor) parts.push(`by ${escape(actor)}`);
  return { type: 'context', elements: [{ type: 'mrkdwn', text: parts.join(' · ') }] };
}

function field(label: string, value: string): Text {
  return { type: 'mrkdwn', text: clip(`*${escape(label)}*\n${escape(value)}`, FIELD_MAX) };
}

/**
 * The route's approvers as people read them: a channel is shared, and the
 * review link decides nothing by itself; whoever opens it signs in, and only
 * these may decide.
 */
function whoDecides(data: Record<string, unknown>): string | null {
  if (!Array.isArray(data.approvers)) return null;
  const named = data.approvers.flatMap((a: unknown) => {
    if (typeof a !== 'object' || a === null) return [];
    const approver = a as Record<string, unknown>;
    if (text(approver.user)) return [text(approver.user)!];
    if (text(approver.group)) return [`group ${text(approver.group)!}`];
    if (text(approver.role)) return [`the workspace's ${text(approver.role)!}s`];
    if (text(approver.rotation)) return [`on call in ${text(approver.rotation)!}`];
    return [];
  });
  if (named.length === 0) return null;
  const quorum = typeof data.quorum === 'number' && data.quorum > 1 ? ` (${data.quorum} of them must approve)` : '';
  return `${named.join(', ')}${quorum}`;
}

function ruleOf(data: Record<string, unknown>): string | null {
  const rule = text(data.rule);
  if (rule) return rule;
  if (Array.isArray(data.rules)) {
    const rules = data.rules.filter((r): r is string => typeof r === 'string' && r.length > 0);
    if (rules.length > 0) return rules.join(', ');
  }
  return null;
}

function text(value: unknown): string | null {
  return typeof value === 'string' && value.length > 0 ? value : null;
}

function scalar(value: unknown): string | null {
  if (typeof value === 'string') return value.length > 0 ? value : null;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return null;
}

/** Only http(s) links become buttons: Slack would also accept other schemes a tenant should not put in front of approvers. */
function httpUrl(value: unknown): string | null {
  if (typeof value !== 'string' || value.length > URL_MAX || !URL.canParse(value)) return null;
  const protocol = new URL(value).protocol;
  return protocol === 'https:' || protocol === 'http:' ? value : null;
}

function escape(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function clip(value: string, max: number): string {
  return value.length <= max ? value : `${value.slice(0, max - 1)}…`;
}
