import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

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
