import {
  DriverAdapterError,
  type SqlDriverAdapter,
  type SqlMigrationAwareDriverAdapterFactory,
} from '@prisma/driver-adapter-utils';

/**
 * The driver adapters the engine migrates through, with what the engine and
 * the adapters leave undone: disposing the connections, and running a
 * migration script whole with the database's own error.
 */

export interface TrackedFactory extends SqlMigrationAwareDriverAdapterFactory {
  /** The engine never disposes the adapters it opens. */
  disposeAll(): Promise<void>;
}

export function trackedFactory(
  connect: () => Promise<SqlDriverAdapter>,
  connectToShadowDb: () => Promise<SqlDriverAdapter>,
): TrackedFactory {
  const opened: SqlDriverAdapter[] = [];
  const track = async (open: () => Promise<SqlDriverAdapter>) => {
    const adapter = await open();
    opened.push(adapter);
    return adapter;
  };
  return {
    provider: 'postgres',
    adapterName: 'aileron-migrator',
    connect: () => track(connect),
    connectToShadowDb: () => track(connectToShadowDb),
    async disposeAll() {
      for (const adapter of opened.splice(0)) await adapter.dispose().catch(() => {});
    },
  };
}

export function withScriptRunner(inner: SqlDriverAdapter, run: (script: string) => Promise<void>): SqlDriverAdapter {
  const adapter: SqlDriverAdapter = {
    provider: inner.provider,
    adapterName: inner.adapterName,
    queryRaw: (query) => inner.queryRaw(query),
    executeRaw: (query) => inner.executeRaw(query),
    startTransaction: (isolationLevel) => inner.startTransaction(isolationLevel),
    dispose: () => inner.dispose(),
    async executeScript(script) {
      try {
        await run(script);
      } catch (error) {
        throw toAdapterError(error);
      }
    },
  };
  if (inner.getConnectionInfo) adapter.getConnectionInfo = () => inner.getConnectionInfo!();
  return adapter;
}

/** So the engine reports (and records in `_prisma_migrations.logs`) the database's own error. */
function toAdapterError(error: unknown): unknown {
  const e = error as Record<string, unknown> | null;
  if (e && typeof e.code === 'string' && typeof e.message === 'string' && typeof e.severity === 'string') {
    const optional = (v: unknown) => (typeof v === 'string' ? v : undefined);
    return new DriverAdapterError({
      kind: 'postgres',
      code: e.code,
      severity: e.severity,
      message: e.message,
      detail: optional(e.detail),
      column: optional(e.column),
      hint: optional(e.hint),
      originalCode: e.code,
      originalMessage: e.message,
    });
  }
  return error;
}
