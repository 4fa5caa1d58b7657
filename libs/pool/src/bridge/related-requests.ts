import type {
  JSONRPCMessage,
  JSONRPCNotification,
  JSONRPCRequest,
  RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import { messageKind } from './message-kind';

/**
 * Which client request a stdio server's message belongs to. Stdio does not
 * say, and Streamable HTTP needs it (a server's sampling request or log line
 * must go on the stream of the call it is about, or it is lost): the requests
 * sent and not yet answered, and the progress tokens they carry, are the
 * evidence. Shared by the bridge and the local driver's sessions, which both
 * stand between a stdio child and a client that wants to know. Messages
 * come here checked (each one twice a call: by shape, not by schema).
 */
export class RelatedRequests {
  /** client requests sent and not yet answered, oldest first */
  readonly inFlight = new Set<RequestId>();
  /** progress token → the client request that carried it */
  private readonly progress = new Map<string | number, RequestId>();

  /** A message on its way to the server. */
  sent(message: JSONRPCMessage): void {
    const kind = messageKind(message);
    if (kind === 'request') {
      const request = message as JSONRPCRequest;
      this.inFlight.add(request.id);
      const progressToken = request.params?._meta?.progressToken;
      if (progressToken !== undefined) this.progress.set(progressToken, request.id);
    } else if (kind === 'notification' && (message as JSONRPCNotification).method === 'notifications/cancelled') {
      // a cancelled request gets no answer from the server; stop waiting for one
      const id = (message as JSONRPCNotification).params?.requestId as RequestId | undefined;
      if (id !== undefined) this.forget(id);
    }
  }

  /** A message from the server: the request it belongs to, where one can be told (an answer settles its own). */
  received(message: JSONRPCMessage): RequestId | undefined {
    const kind = messageKind(message);
    if (kind === 'result' || kind === 'error') {
      const id = (message as { id?: RequestId }).id;
      if (id !== undefined) this.forget(id);
      return undefined;
    }
    if (kind === 'notification') {
      const { method, params } = message as JSONRPCNotification;
      if (method === 'notifications/progress') return this.progress.get(params?.progressToken as string | number);
      if (method === 'notifications/resources/updated' || method.endsWith('/list_changed')) return undefined;
    }
    // stdio does not say which call a sampling request or log line belongs to; the latest call is the best guess
    return [...this.inFlight].at(-1);
  }

  private forget(id: RequestId): void {
    this.inFlight.delete(id);
    for (const [token, request] of this.progress) if (request === id) this.progress.delete(token);
  }
}
