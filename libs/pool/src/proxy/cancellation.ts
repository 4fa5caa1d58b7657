/**
 * A client request's cancellation: what an AbortController carries, for the
 * pool's requests in flight.
 *
 * Why not an AbortController per request: node makes an AbortSignal dearly
 * (1.6 µs warm, 2.6 µs with its first listener; on a tool call's cold path
 * about 8 µs of the 0.2 ms the pool adds), and a call that is never cancelled
 * and never waits for a person needs none. Listeners here are plain
 * callbacks; the signal is made only for what takes one (waiting for an
 * approval or for a connection), and follows this if it was cancelled first.
 */
export class Cancellation {
  private controller: AbortController | undefined;
  private listeners: Set<() => void> | undefined;
  private why: unknown;
  private done = false;

  get aborted(): boolean {
    return this.done;
  }

  get reason(): unknown {
    return this.why;
  }

  /** A signal that aborts with this, for an API that takes one. */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.done) this.controller.abort(this.why);
    }
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    if (this.done) return;
    this.done = true;
    this.why = reason;
    const listeners = this.listeners;
    this.listeners = undefined;
    if (listeners) for (const listener of listeners) listener();
    this.controller?.abort(reason);
  }

  /**
   * `listener` is called once, when this is cancelled (never if it already
   * was, as with an AbortSignal); the function returned stops that.
   */
  onAbort(listener: () => void): () => void {
    if (this.done) return () => undefined;
    const listeners = (this.listeners ??= new Set());
    listeners.add(listener);
    return () => listeners.delete(listener);
  }
}
