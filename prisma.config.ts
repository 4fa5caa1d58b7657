// Prisma 7 keeps the datasource URL here. The CLI is only used for `generate`
// on these machines (migrations run through the wasm schema engine, see
// libs/platform/database/src/migrator/), so a missing DATABASE_URL must not throw.
import { defineConfig } from 'prisma/config';

export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? 'postgresql://localhost:5432/aileron' },
});
