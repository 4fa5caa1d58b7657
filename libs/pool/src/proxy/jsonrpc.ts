import {
  JSONRPCErrorResponseSchema,
  JSONRPCNotificationSchema,
  JSONRPCRequestSchema,
  JSONRPCResultResponseSchema,
  type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js';
import { isPlainResult, messageKind } from '../bridge/message-kind';

/** A JSON-RPC error object as it travels; `data` passes through untouched. */
export interface RpcError {
  code: number;
  message: string;
  data?: unknown;
}

// Implementation-defined server errors (-32000..-32099), stable for clients to match on.
/** The instance or upstream session went away while the request was open. */
export const UPSTREAM_GONE = -32000;
/** The instance has AILERON_POOL_MAX_CONCURRENT_CALLS requests in flight. */
export const INSTANCE_BUSY = -32001;
/** The server could not be started or reached at all. */
export const UPSTREAM_UNAVAILABLE = -32002;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;

const SCHEMAS = {
  request: JSONRPCRequestSchema,
  notification: JSONRPCNotificationSchema,
  error: JSONRPCErrorResponseSchema,
  result: JSONRPCResultResponseSchema,
} as const;

/**
 * A message as the SDK's transport accepts one: JSON, and valid JSON-RPC;
 * anything else is dropped, as it does. Checked against the one schema its
 * shape names: the SDK's union of all four tries them in turn, and each that
 * fails (a request's, a notification's, before an answer's) costs more than
 * the check that passes.
 */
export function parseMessage(data: string): JSONRPCMessage | undefined {
  try {
    const parsed = JSON.parse(data) as unknown;
    if (typeof parsed !== 'object' || parsed === null) return undefined;
    const kind = messageKind(parsed as JSONRPCMessage);
    if (kind === 'result' && isPlainResult(parsed)) return parsed;
    const checked = SCHEMAS[kind].safeParse(parsed);
    return checked.success ? (checked.data as JSONRPCMessage) : undefined;
  } catch {
    return undefined;
  }
}
