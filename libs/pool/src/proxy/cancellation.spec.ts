import { describe, expect, it } from 'vitest';
import { Cancellation } from './cancellation';

describe('Cancellation', () => {
  it('tells each listener once, with the reason, and a stopped listener not at all', () => {
    const cancel = new Cancellation();
    const heard: string[] = [];
    cancel.onAbort(() => heard.push(`first: ${String(cancel.reason)}`));
    const stop = cancel.onAbort(() => heard.push('stopped'));
    cancel.onAbort(() => heard.push(`third: ${String(cancel.aborted)}`));
    stop();
    cancel.abort('the user pressed stop');
    cancel.abort('a second time');
    expect(heard).toEqual(['first: the user pressed stop', 'third: true']);
    expect(cancel.reason).toBe('the user pressed stop');
  });

  it('does not call a listener added after it was cancelled, as an AbortSignal would not', () => {
    const cancel = new Cancellation();
    cancel.abort('gone');
    let called = false;
    const stop = cancel.onAbort(() => {
      called = true;
    });
    stop();
    expect(called).toBe(false);
  });

  it('gives a signal that aborts with it, whether made before or after it was cancelled', () => {
    const early = new Cancellation();
    const signal = early.signal;
    const heard: unknown[] = [];
    signal.addEventListener('abort', () => heard.push(signal.reason));
    expect(signal.aborted).toBe(false);
    early.abort('session closed');
    expect(heard).toEqual(['session closed']);

    const late = new Cancellation();
    late.abort('cancelled by the client');
    expect(late.signal.aborted).toBe(true);
    expect(late.signal.reason).toBe('cancelled by the client');
    expect(late.signal).toBe(late.signal);
  });
});
