export * from './database';
export { DATABASE_HANDLE, DatabaseService } from './database.service';
export { Repository } from './repository';
export * from './database.module';
export * from './prisma-errors';
export { applyMigrations, createMigration } from './migrator';
export type { MigrationTarget } from './migrator';
// Repositories (and only they, see .dependency-cruiser.cjs) use the generated types.
export { Prisma, PrismaClient } from './generated/prisma/client';
export type * from './generated/prisma/models';
export { Role as DbRole } from './generated/prisma/enums';
export { DataDirLockedError } from './data-dir-lock';
export { RetryingLoopLog } from './retrying-loop-log';
export { keysetAfter, keysetOrder } from './keyset';
export type { Keyset, KeysetDirection } from './keyset';
export { storableJson, storableText } from './storable-json';
