import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';

/**
 * One end of an MCP connection whose other end is in this process (a server
 * the control plane serves itself). Messages pass as values: nothing is
 * encoded, sent over a socket and parsed again, which for a large answer (a
 * file read from a sandbox) was most of the call's time.
 *
 * Unlike the SDK's InMemoryTransport, the request a server's message belongs
 * to (`relatedRequestId`: the call an elicitation or a progress note is about)
 * reaches the other end, as the stream a message came on does over HTTP.
 */
export class InProcessTransport implements Transport {
  onmessage?: (message: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  /** where set, takes every message instead of `onmessage`, with the request it belongs to */
  onrelated?: (message: JSONRPCMessage, related: RequestId | undefined) => void;
  private other: InProcessTransport | undefined;
  private closed = false;

  /** Two ends, each delivering what it is sent to the other. */
  static pair(): [InProcessTransport, InProcessTransport] {
    const a = new InProcessTransport();
    const b = new InProcessTransport();
    a.other = b;
    b.other = a;
    return [a, b];
  }

  async start(): Promise<void> {}

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const other = this.other;
    if (this.closed || !other || other.closed) throw new Error('the in-process MCP connection is closed');
    other.deliver(message, options?.relatedRequestId);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.();
    await this.other?.close();
  }

  private deliver(message: JSONRPCMessage, related: RequestId | undefined): void {
    try {
      if (this.onrelated) this.onrelated(message, related);
      else this.onmessage?.(message);
    } catch (error) {
      // the sender's send() must not fail for what the receiver did with the message
      this.onerror?.(error instanceof Error ? error : new Error(String(error)));
    }
  }
}
