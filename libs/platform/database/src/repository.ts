import { Injectable } from '@nestjs/common';
import type { Transaction } from './database';
import { DatabaseService, prismaClientOf } from './database.service';
import type { PrismaClient } from './generated/prisma/client';

/**
 * What every `*.repository.ts` class extends, and the only way to the Prisma
 * client outside this library: DatabaseService does not expose it, so a
 * service that tries to query the database does not compile. Only classes in
 * `*.repository.ts` files may extend it (scripts/data-access-rules.mjs, run by `npm run lint`).
 */
@Injectable()
export abstract class Repository {
  constructor(protected readonly db: DatabaseService) {}

  /** The client to query outside a transaction. */
  protected get client(): PrismaClient {
    return prismaClientOf(this.db);
  }

  /** The transaction's client if one is given, else the pool. */
  protected use(tx?: Transaction): PrismaClient | Transaction {
    return tx ?? this.client;
  }
}
