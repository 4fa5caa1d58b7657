/**
 * Where a failed MCP tool call says why, whoever answers it: the pool's
 * refusals (policy, approvals, caveats), the sandbox tools and aileron-mcp's
 * own tools. The text starts with the code, for the model and the person
 * reading it; `_meta["aileron/refusal"]` carries the code, the message and any
 * details, for programs. Not structuredContent: a client checks that against
 * the tool's output schema even on an error (the MCP SDK's Client.callTool
 * does), and a proxied tool's schema knows nothing of ours.
 */
export const TOOL_ERROR_META = 'aileron/refusal';

export interface ToolErrorDetails {
  /** stable, UPPER_SNAKE: what a program branches on */
  code: string;
  message: string;
  [detail: string]: unknown;
}

export interface ToolErrorResult {
  [key: string]: unknown;
  content: { type: 'text'; text: string }[];
  _meta: { [TOOL_ERROR_META]: ToolErrorDetails };
  isError: true;
}

const CODE = /^[A-Z][A-Z0-9_]*$/;

/** A tool result with isError, its code in the one place (see TOOL_ERROR_META); `details` add machine-readable facts (an approval's id). */
export function toolError(code: string, message: string, details: Record<string, unknown> = {}): ToolErrorResult {
  // a code outside the convention would be a code nobody can rely on; say so rather than send it
  const stable = CODE.test(code) ? code : 'TOOL_ERROR';
  return {
    content: [{ type: 'text', text: `${stable}: ${message}` }],
    _meta: { [TOOL_ERROR_META]: { ...details, code: stable, message } },
    isError: true,
  };
}

/** The code and details of a tool error made by toolError; undefined for any other result. */
export function toolErrorOf(result: unknown): ToolErrorDetails | undefined {
  const meta = (result as { isError?: unknown; _meta?: Record<string, unknown> } | null)?._meta?.[TOOL_ERROR_META] as
    | ToolErrorDetails
    | undefined;
  return (result as { isError?: unknown }).isError === true && typeof meta?.code === 'string' ? meta : undefined;
}
