import { useEffect, useRef, useState } from 'react';

/** One event of the workspace's stream, in the shape webhooks receive (docs/webhooks.md § The envelope). */
export interface WorkspaceEvent {
  id: string;
  type: string;
  time: string;
  workspace: string | null;
  /** the agent session the event belongs to, where there is one */
  session: string | null;
  data: Record<string, unknown>;
}

/**
 * The workspace's event stream (`GET /v1/workspaces/{ws}/events`, server-sent
 * events) while the page is open: `onEvent` for each event of one of `types`.
 * Answers whether the stream is open. The browser reconnects by itself and
 * sends the last event id, so the server replays what was missed meanwhile.
 */
export function useWorkspaceEvents(
  ws: string,
  types: readonly string[],
  onEvent: (event: WorkspaceEvent) => void,
  enabled = true,
): boolean {
  const [live, setLive] = useState(false);
  // the latest handler, without opening a new stream at every render
  const handler = useRef(onEvent);
  useEffect(() => {
    handler.current = onEvent;
  });
  const wanted = types.join(',');
  useEffect(() => {
    if (!enabled) return;
    const events = new EventSource(
      `/v1/workspaces/${encodeURIComponent(ws)}/events?${new URLSearchParams({ types: wanted })}`,
    );
    const deliver = (message: MessageEvent<string>) => handler.current(JSON.parse(message.data) as WorkspaceEvent);
    events.onopen = () => setLive(true);
    events.onerror = () => setLive(false);
    // each event is named by its type: a listener per type (`onmessage` hears only unnamed ones)
    for (const type of wanted.split(',')) events.addEventListener(type, deliver);
    return () => {
      events.close();
      setLive(false);
    };
  }, [ws, wanted, enabled]);
  return live;
}
