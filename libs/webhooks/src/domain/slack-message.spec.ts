import { describe, expect, it } from 'vitest';
import type { PublicEvent } from '@aileron/outbox';
import { renderBody } from './formats';
import { slackMessage } from './slack-message';

function anEvent(overrides: Partial<PublicEvent> = {}): PublicEvent {
  return {
    id: 'evt_42',
    type: 'policy.updated',
    time: '2026-11-24T12:00:00.000Z',
    organization_id: '00000000-0000-4000-8000-000000000001',
    workspace_id: '00000000-0000-4000-8000-000000000002',
    workspace: 'payments',
    session: null,
    data: { version: 3, rules: 2, actor: 'token:abc' },
    ...overrides,
  };
}

const approvalRequested = anEvent({
  type: 'approval.requested',
  session: 's-1',
  data: {
    approval_id: 'a1',
    review_url: 'https://aileron.example.com/review/a1',
    server: 'github',
    tool: 'merge_pull_request',
    requester: 'alice@example.com',
    rules: ['merge-needs-ok'],
    expires_at: '2026-11-24T13:00:00.000Z',
    arguments: { repo: 'payments', token: '[redacted]' },
    actor: 'gateway:g1',
  },
});

describe('Slack format', () => {
  it('an approval request shows server, tool, requester and rule, with a button to the review page', () => {
    const message = slackMessage(approvalRequested);
    expect(message.text).toContain('alice@example.com');
    expect(message.text).toContain('github/merge_pull_request');
    expect(message.blocks[0]).toEqual({
      type: 'header',
      text: { type: 'plain_text', text: 'Approval requested', emoji: false },
    });
    const fields = message.blocks.flatMap((b) => (b.type === 'section' ? (b.fields ?? []) : [])).map((f) => f.text);
    expect(fields).toEqual(
      expect.arrayContaining([
        '*Server*\ngithub',
        '*Tool*\nmerge_pull_request',
        '*Requester*\nalice@example.com',
        '*Rule*\nmerge-needs-ok',
        '*Workspace*\npayments',
      ]),
    );
    const actions = message.blocks.find((b) => b.type === 'actions');
    expect(actions).toMatchObject({
      elements: [{ type: 'button', url: 'https://aileron.example.com/review/a1', style: 'primary' }],
    });
    // arguments stay out of a channel message
    expect(JSON.stringify(message)).not.toContain('redacted');
  });

  it('a request a route posts to its channel is the same message, naming who decides, never the arguments', () => {
    const message = slackMessage({
      ...approvalRequested,
      type: 'approval.routed',
      data: {
        ...approvalRequested.data,
        route: 'cost-approval',
        quorum: 2,
        channels: ['cost-approvals'],
        approvers: [{ group: 'finance' }, { role: 'approver' }, { user: 'dana@example.com' }, { rotation: 'primary' }],
      },
    });
    expect(message.blocks[0]).toMatchObject({ type: 'header', text: { text: 'Approval requested' } });
    const fields = message.blocks.flatMap((b) => (b.type === 'section' ? (b.fields ?? []) : [])).map((f) => f.text);
    expect(fields).toContain(
      "*Who decides*\ngroup finance, the workspace's approvers, dana@example.com, on call in primary (2 of them must approve)",
    );
    expect(message.blocks.find((b) => b.type === 'actions')).toMatchObject({
      elements: [{ type: 'button', url: 'https://aileron.example.com/review/a1' }],
    });
    expect(JSON.stringify(message)).not.toContain('redacted');
  });

  it('escapes what the event carries, so it cannot mention a channel or forge a link', () => {
    const message = slackMessage({
      ...approvalRequested,
      data: { ...approvalRequested.data, requester: '<!channel> <https://evil.example|click>' },
    });
    const json = JSON.stringify(message);
    expect(json).not.toContain('<!channel>');
    expect(json).toContain('&lt;!channel&gt;');
  });

  it('only http(s) review links become buttons', () => {
    const message = slackMessage({
      ...approvalRequested,
      data: { ...approvalRequested.data, review_url: 'javascript:alert(1)' },
    });
    expect(message.blocks.some((b) => b.type === 'actions')).toBe(false);
  });

  it('any other event gets a header, its scalar fields and a context line', () => {
    const message = slackMessage(anEvent());
    expect(message.text).toBe('Policy updated in payments by token:abc');
    expect(message.blocks[0]).toMatchObject({ type: 'header', text: { text: 'Policy updated' } });
    expect(message.blocks[1]).toMatchObject({
      type: 'section',
      fields: [{ text: '*Workspace*\npayments' }, { text: '*version*\n3' }, { text: '*rules*\n2' }],
    });
    expect(message.blocks.at(-1)).toMatchObject({
      type: 'context',
      elements: [{ type: 'mrkdwn', text: expect.stringContaining('`policy.updated` · evt_42') }],
    });
  });

  it('keeps within Block Kit limits', () => {
    const data = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`k${i}`, 'x'.repeat(3000)]));
    const message = slackMessage(anEvent({ type: `custom.${'y'.repeat(200)}`, data }));
    const section = message.blocks.find((b) => b.type === 'section');
    expect(section && section.type === 'section' ? section.fields!.length : 0).toBeLessThanOrEqual(10);
    for (const field of section && section.type === 'section' ? section.fields! : [])
      expect(field.text.length).toBeLessThanOrEqual(2000);
    const header = message.blocks[0];
    expect(header?.type === 'header' ? header.text.text.length : 0).toBeLessThanOrEqual(150);
  });

  it('the json format is the event envelope itself', () => {
    expect(JSON.parse(renderBody('json', anEvent()))).toEqual(anEvent());
    expect(JSON.parse(renderBody('slack', anEvent()))).toHaveProperty('blocks');
  });
});
