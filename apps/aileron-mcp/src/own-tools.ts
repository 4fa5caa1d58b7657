import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { describeIssues, fieldIssues, toolError } from '@aileron/errors';
import { ApprovalView, ControlPlane, ControlPlaneError } from './control-plane';

/** The server's maximum long-poll; waiting longer is calling again. */
const MAX_WAIT_SECONDS = 120;
const wait = z.number().int().min(0).max(MAX_WAIT_SECONDS);

const approvalStatusArgs = z
  .object({
    approval_id: z
      .uuid()
      .describe('the approval_id a tool call answered with (in its text and in _meta["aileron/refusal"])'),
    wait_seconds: wait
      .default(0)
      .describe(`wait this long for a decision (at most ${MAX_WAIT_SECONDS}); 0 answers at once`),
  })
  .strict();

const messageUserArgs = z
  .object({
    text: z.string().min(1).max(8_000).describe('what to tell or ask the people behind this session'),
    level: z
      .enum(['info', 'warning', 'question'])
      .default('info')
      .describe('question: you need an answer; warning: something they should look at'),
    wait_seconds: wait
      .default(0)
      .describe(`wait this long for an answer (at most ${MAX_WAIT_SECONDS}); 0 sends and returns`),
  })
  .strict();

function schemaOf(schema: z.ZodObject): Tool['inputSchema'] {
  // `io: input`: fields with defaults are optional for the caller
  const { $schema: _ignored, ...json } = z.toJSONSchema(schema, { io: 'input' }) as Record<string, unknown>;
  return json as Tool['inputSchema'];
}

export const OWN_TOOLS: Tool[] = [
  {
    name: 'approval_status',
    title: 'Aileron approval status',
    description:
      'The state of an approval that a tool call is waiting for. When a call answers that it needs approval, share its review URL with your people, wait here (wait_seconds), and once it is approved call the same tool again with exactly the same arguments: it runs once.',
    inputSchema: schemaOf(approvalStatusArgs),
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  {
    name: 'message_user',
    title: 'Message the people behind this session',
    description:
      'Send a message to the people who started this agent session (they see it in Aileron, and in chat if their workspace forwards events). Use level "question" when you need a decision, and wait_seconds to wait for their answer.',
    inputSchema: schemaOf(messageUserArgs),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  },
];

export const OWN_TOOL_NAMES: ReadonlySet<string> = new Set(OWN_TOOLS.map((t) => t.name));

function text(body: string, structured: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: body }], structuredContent: structured };
}

function invalid(error: z.ZodError): CallToolResult {
  return toolError('INVALID_ARGUMENTS', describeIssues(fieldIssues('arguments', error.issues)));
}

function describeApproval(view: ApprovalView): string {
  const tool = `${view.server}__${view.tool}`;
  switch (view.status) {
    case 'pending':
      return `Approval ${view.id} for ${tool} is still pending. A person decides at ${view.review_url} (until ${view.expires_at}). Call approval_status again with wait_seconds to keep waiting.`;
    case 'approved':
      return view.consumed_at
        ? `Approval ${view.id} for ${tool} was approved and has been used: the approved call ran.`
        : `Approval ${view.id} for ${tool} is approved. Call ${tool} again with exactly the same arguments: it runs once.`;
    case 'denied':
      return `Approval ${view.id} for ${tool} was denied${view.reason ? `: ${view.reason}` : ''}. Do not retry the call; ask with message_user if you need another way.`;
    default:
      return `Approval ${view.id} for ${tool} is ${view.status}. Calling ${tool} again asks for a new approval.`;
  }
}

/** Runs one of our own tools; what the control plane refuses becomes a tool error the agent can read. */
export async function callOwnTool(
  controlPlane: ControlPlane,
  name: string,
  args: unknown,
  signal: AbortSignal,
): Promise<CallToolResult> {
  try {
    if (name === 'approval_status') {
      const parsed = approvalStatusArgs.safeParse(args ?? {});
      if (!parsed.success) return invalid(parsed.error);
      const view = await controlPlane.approval(parsed.data.approval_id, parsed.data.wait_seconds, signal);
      return text(describeApproval(view), {
        approval_id: view.id,
        status: view.status,
        tool: `${view.server}__${view.tool}`,
        review_url: view.review_url,
        reason: view.reason,
        decided_at: view.decided_at,
        expires_at: view.expires_at,
        used: view.consumed_at !== null,
      });
    }
    const parsed = messageUserArgs.safeParse(args ?? {});
    if (!parsed.success) return invalid(parsed.error);
    const sent = await controlPlane.postMessage(parsed.data.text, parsed.data.level, signal);
    if (parsed.data.wait_seconds === 0)
      return text(`Message sent (id ${sent.id}).`, { message_id: sent.id, replies: [] });
    const replies = await controlPlane.replies(sent.id, parsed.data.wait_seconds, signal);
    const answer =
      replies.length > 0
        ? `They answered:\n${replies.map((r) => `- ${r.author}: ${r.text}`).join('\n')}`
        : `No answer within ${parsed.data.wait_seconds} s.`;
    return text(`Message sent (id ${sent.id}). ${answer}`, {
      message_id: sent.id,
      replies: replies.map((r) => ({ id: r.id, author: r.author, text: r.text, created_at: r.created_at })),
    });
  } catch (error) {
    if (error instanceof ControlPlaneError) return toolError(error.code, error.message);
    throw error;
  }
}
