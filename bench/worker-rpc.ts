import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

/**
 * A bench's clients in a worker thread, asked by command from the main
 * thread, where the control plane runs: on its event loop a client's own
 * work (decoding an answer's event stream, parsing its JSON) would queue
 * behind the server's and count as the server's, as it never does where the
 * agent runs in a process of its own.
 */
export class WorkerClients<Command, Answer> {
  private readonly worker: Worker;
  private readonly waiting = new Map<number, { resolve(answer: Answer): void; reject(error: Error): void }>();
  private nextId = 0;

  /** `file`: the bench's module, which calls serveInWorker(role, …) when it loads in the worker */
  constructor(file: string, role: string) {
    this.worker = new Worker(file, { workerData: { role } });
    this.worker.on('message', (message: { id: number; answer?: Answer; error?: string }) => {
      const waiter = this.waiting.get(message.id);
      this.waiting.delete(message.id);
      if (message.error !== undefined) waiter?.reject(new Error(`${role} worker: ${message.error}`));
      else waiter?.resolve(message.answer!);
    });
    this.worker.on('error', (error) => {
      for (const waiter of this.waiting.values()) waiter.reject(error);
      this.waiting.clear();
    });
  }

  send<T extends Answer>(command: Command): Promise<T> {
    const id = ++this.nextId;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (answer: Answer) => void, reject });
      this.worker.postMessage({ id, command });
    });
  }

  /** `last`: the command that closes the worker's clients, sent before it stops */
  async close(last?: Command): Promise<void> {
    if (last !== undefined) await this.send(last).catch(() => undefined);
    await this.worker.terminate();
  }
}

/** In the worker WorkerClients started with `role` (and nowhere else): answers its commands with the handler `start` makes. */
export function serveInWorker<Command, Answer>(role: string, start: () => (command: Command) => Promise<Answer>): void {
  if (isMainThread || (workerData as { role?: string } | null)?.role !== role) return;
  const handle = start();
  parentPort!.on('message', (message: { id: number; command: Command }) => {
    handle(message.command).then(
      (answer) => parentPort!.postMessage({ id: message.id, answer }),
      (error: unknown) =>
        parentPort!.postMessage({
          id: message.id,
          error: error instanceof Error ? (error.stack ?? error.message) : String(error),
        }),
    );
  });
}
