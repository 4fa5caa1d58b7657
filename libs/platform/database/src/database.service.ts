import { Inject, Injectable } from '@nestjs/common';
import type { DatabaseHandle, Transaction } from './database';
import type { PrismaClient } from './generated/prisma/client';

export const DATABASE_HANDLE = Symbol('DATABASE_HANDLE');

/** may be async: `transaction` resolves once every hook has run */
type CommitHook = () => void | Promise<void>;

const clients = new WeakMap<DatabaseService, PrismaClient>();

/** For Repository (repository.ts) only; not exported from the library's index. */
export function prismaClientOf(db: DatabaseService): PrismaClient {
  return clients.get(db)!;
}

/**
 * The unit of work for services: `transaction(fn)` hands `fn` an opaque
 * Transaction to pass on to repositories, and
 * runs after-commit hooks (e.g. waking the outbox dispatcher) only on success,
 * and only for the transactions that asked for them.
 * The handle is closed by whoever opened it, after Nest has shut down.
 */
@Injectable()
export class DatabaseService {
  private readonly commitHooks = new WeakMap<Transaction, CommitHook[]>();

  constructor(@Inject(DATABASE_HANDLE) private readonly handle: DatabaseHandle) {
    // the client is reachable through Repository only (repository.ts)
    clients.set(this, handle.client);
  }

  get kind(): DatabaseHandle['kind'] {
    return this.handle.kind;
  }

  async transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    let committing: Transaction | undefined;
    const result = await this.handle.client.$transaction(
      (tx) => {
        committing = tx as Transaction;
        return fn(committing);
      },
      { timeout: 30_000, maxWait: 10_000 },
    );
    const hooks = committing && this.commitHooks.get(committing);
    if (hooks) await Promise.all(hooks.map(async (hook) => hook()));
    return result;
  }

  /** Runs `hook` once `tx` has committed; never when it rolls back. */
  afterCommit(tx: Transaction, hook: CommitHook): void {
    const hooks = this.commitHooks.get(tx);
    if (hooks) {
      if (!hooks.includes(hook)) hooks.push(hook);
    } else this.commitHooks.set(tx, [hook]);
  }

  ping(): Promise<boolean> {
    return this.handle.ping();
  }
}
