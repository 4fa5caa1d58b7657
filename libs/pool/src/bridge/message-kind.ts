import type { JSONRPCMessage, JSONRPCRequest, JSONRPCResultResponse } from '@modelcontextprotocol/sdk/types.js';

// Here, not beside parseMessage (proxy/jsonrpc.ts): the runner image holds the bridge's folder alone.
export type MessageKind = 'request' | 'notification' | 'error' | 'result';

/**
 * What a message is, by its shape: for a message checked once (`parseMessage`,
 * or the SDK's own check on the way in) it is what the SDK's `isJSONRPC…`
 * guards would say, without parsing it against their schemas again.
 */
export function messageKind(message: JSONRPCMessage): MessageKind {
  if ('method' in message) return 'id' in message ? 'request' : 'notification';
  return 'error' in message ? 'error' : 'result';
}

/**
 * The SDK's schemas, for the shape nearly every tool call's request and
 * answer has (no `_meta`), checked without zod: the two checks sit on the
 * proxied call's path, where zod's generic code, cold on every call, cost
 * some 10 µs each in a profile against well under 1 µs here. They only
 * admit: what they admit the schema admits as it is (`JSONRPCRequestSchema`,
 * `JSONRPCResultResponseSchema`: strict at the top, loose within), and
 * anything else, `_meta` included, is the schema's to judge.
 */
export function isPlainRequest(value: unknown): value is JSONRPCRequest {
  if (!isObject(value) || value.jsonrpc !== '2.0' || !isRequestId(value.id) || typeof value.method !== 'string')
    return false;
  const params = value.params;
  if (params !== undefined && (!isObject(params) || params._meta !== undefined)) return false;
  return onlyKeys(value, REQUEST_KEYS);
}

export function isPlainResult(value: unknown): value is JSONRPCResultResponse {
  if (!isObject(value) || value.jsonrpc !== '2.0' || !isRequestId(value.id)) return false;
  const result = value.result;
  return isObject(result) && result._meta === undefined && onlyKeys(value, RESULT_KEYS);
}

const REQUEST_KEYS = new Set(['jsonrpc', 'id', 'method', 'params']);
const RESULT_KEYS = new Set(['jsonrpc', 'id', 'result']);

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `RequestIdSchema`: a string, or an integer (a safe one: the schema's `int()`) */
function isRequestId(value: unknown): boolean {
  return typeof value === 'string' || Number.isSafeInteger(value);
}

function onlyKeys(value: Record<string, unknown>, allowed: ReadonlySet<string>): boolean {
  for (const key in value) if (!allowed.has(key)) return false;
  return true;
}
