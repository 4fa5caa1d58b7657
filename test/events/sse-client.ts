import { expect } from 'vitest';

export interface Received {
  id: string;
  event: string;
  data: {
    id: string;
    type: string;
    workspace: string | null;
    session?: string | null;
    execution_mode?: string;
    data: Record<string, unknown>;
  };
}

/** An SSE client reading the stream as a browser's EventSource would. */
export function listen(
  url: string,
  token: string,
  headers: Record<string, string> = {},
): { events: Received[]; close(): void; opened: Promise<void>; ended: Promise<string> } {
  const controller = new AbortController();
  const events: Received[] = [];
  let ended!: (why: string) => void;
  const endedPromise = new Promise<string>((resolve) => (ended = resolve));
  let opened!: () => void;
  const openedPromise = new Promise<void>((resolve) => (opened = resolve));
  void (async () => {
    const response = await fetch(url, {
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', ...headers },
      signal: controller.signal,
    });
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let endedWith = '';
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
      if (done) return ended(endedWith);
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (block.startsWith(': connected')) opened();
        if (block.startsWith('event: stream.ended')) endedWith = block;
        const fields = Object.fromEntries(
          block
            .split('\n')
            .filter((l) => !l.startsWith(':'))
            .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 2)]),
        );
        if (fields.id) events.push({ id: fields.id, event: fields.event!, data: JSON.parse(fields.data!) });
      }
    }
  })();
  return { events, close: () => controller.abort(), opened: openedPromise, ended: endedPromise };
}
