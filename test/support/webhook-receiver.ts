import { createServer, IncomingHttpHeaders } from 'node:http';
import { AddressInfo } from 'node:net';

export interface Received {
  raw: string;
  headers: IncomingHttpHeaders;
  path: string;
  /** what the receiver answered (or will answer, for a request it holds) */
  answered: number;
  at: number;
}

/** A request the receiver keeps unanswered: a delivery in flight. */
export interface Held {
  /** the request, once it has come */
  arrived: Promise<Received>;
  /** answers it now */
  release(): void;
}

export interface Receiver {
  url: string;
  requests: Received[];
  /** requests answered 2xx */
  accepted(): Received[];
  /** from now on, answer with this status */
  answer(status: number): void;
  /** the next request is held until `release()` (then answered as planned) */
  holdNext(): Held;
  close(): Promise<void>;
}

/** A webhook receiver on 127.0.0.1: answers from `plan` in order, then `then` for the rest. */
export async function aReceiver(plan: number[], then = 204): Promise<Receiver> {
  const requests: Received[] = [];
  let fallback = then;
  let hold: { arrived: (request: Received) => void; released: Promise<void> } | undefined;
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString('utf8')));
    req.on('end', () => {
      const answered = plan[requests.length] ?? fallback;
      const request = { raw, headers: req.headers, path: req.url ?? '', answered, at: Date.now() };
      requests.push(request);
      const held = hold;
      hold = undefined;
      if (!held) return void res.writeHead(answered).end();
      held.arrived(request);
      void held.released.then(() => res.writeHead(answered).end());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/aileron-path-token`,
    requests,
    accepted: () => requests.filter((r) => r.answered >= 200 && r.answered < 300),
    answer: (status) => (fallback = status),
    holdNext() {
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      const arrived = new Promise<Received>((resolve) => (hold = { arrived: resolve, released }));
      return { arrived, release };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
