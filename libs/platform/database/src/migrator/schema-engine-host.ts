import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import { bindMigrationAwareSqlAdapterFactory } from '@prisma/driver-adapter-utils';
import type { SchemaEngine } from '@prisma/schema-engine-wasm';
import { type Log, messageOf } from './common';
import type { TrackedFactory } from './driver-adapters';
import type { SchemaFile } from './migration-files';

type EngineModule = typeof import('@prisma/schema-engine-wasm/schema_engine_bg');

// Node has WebAssembly; our lib settings (ES2023, no DOM) do not declare it.
declare const WebAssembly: {
  instantiate(
    bytes: Uint8Array,
    imports: Record<string, Record<string, unknown>>,
  ): Promise<{ instance: { exports: Record<string, unknown> } }>;
  RuntimeError: new (message?: string) => Error;
};

/** What the engine diffs and applies: no tables or enums of others to leave alone. */
export const FILTERS = { externalTables: [] as string[], externalEnums: [] as string[] };

/** The bindings report a Rust panic to this object on the global object, and nowhere else. */
const PANIC_KEY = 'PRISMA_WASM_PANIC_REGISTRY';

/**
 * The wasm schema engine, loaded on first use (the fast path never needs it)
 * and kept for the next run. The generated bindings keep their wasm instance
 * (and views of its memory) in module state, so each load imports a copy of
 * the bindings of its own: two hosts in one process never share or swap an
 * instance under a running engine, and a fresh load after a crash starts
 * clean. A process that migrates several databases passes one host to each
 * call, so the engine loads once.
 */
export class SchemaEngineHost {
  private loading: Promise<EngineModule> | undefined;
  private lastPanic: string | null = null;

  async run<T>(
    schema: SchemaFile,
    factory: TrackedFactory,
    log: Log,
    fn: (engine: SchemaEngine) => Promise<T>,
  ): Promise<T> {
    // Without a registry a Rust panic surfaces only as "unreachable"; set per run, so it reports to the host that runs.
    (globalThis as unknown as Record<string, unknown>)[PANIC_KEY] = {
      set_message: (message: string) => (this.lastPanic = message),
    };
    this.lastPanic = null;
    const started = performance.now();
    const bg = await this.load();
    let engine: SchemaEngine | undefined;
    try {
      engine = await bg.SchemaEngine.new(
        { datamodels: [[schema.path, schema.content]] },
        (line: string) => forwardEngineLog(line, log),
        bindMigrationAwareSqlAdapterFactory(factory),
      );
      log(`schema engine ready in ${Math.round(performance.now() - started)} ms`);
      return await fn(engine);
    } catch (error) {
      if (error instanceof WebAssembly.RuntimeError) {
        // No engine call is safe after a panic: load a fresh instance next time.
        this.loading = undefined;
        engine = undefined;
        throw new Error(`The schema engine crashed: ${this.lastPanic ?? error.message}`);
      }
      throw error;
    } finally {
      engine?.free();
      await factory.disposeAll();
    }
  }

  private load(): Promise<EngineModule> {
    if (this.loading) return this.loading;
    const loading = (async () => {
      // The package entry imports the .wasm file as a module, which Node cannot;
      // wire the bindings to the instance by hand. The query string makes this
      // copy of the bindings ours alone.
      const bindings = require.resolve('@prisma/schema-engine-wasm/schema_engine_bg');
      const bg = (await import(`${pathToFileURL(bindings).href}?host=${randomUUID()}`)) as EngineModule;
      const imports: Record<string, unknown> = { ...bg };
      for (const name of Object.keys(imports)) {
        if (name.startsWith('__wbg_setTimeout_')) {
          // The engine arms 10 s timers (e.g. its advisory-lock timeout) and never
          // clears them; unref'd, they cannot keep the process alive.
          imports[name] = (fn: () => void, ms: number) => setTimeout(fn, ms >>> 0).unref();
        }
      }
      const { instance } = await WebAssembly.instantiate(await readFile(bindings.replace(/\.js$/, '.wasm')), {
        './schema_engine_bg.js': imports,
      });
      bg.__wbg_set_wasm(instance.exports);
      (instance.exports.__wbindgen_start as (() => void) | undefined)?.();
      return bg;
    })();
    this.loading = loading;
    loading.catch(() => {
      if (this.loading === loading) this.loading = undefined;
    });
    return loading;
  }
}

function forwardEngineLog(line: string, log: Log): void {
  try {
    const entry = JSON.parse(line) as { level?: string; fields?: { message?: string } };
    const message = entry.fields?.message;
    // INFO "Applying `x`" carries the whole script in another field; keep the message only.
    if (
      message &&
      entry.level !== 'DEBUG' &&
      entry.level !== 'TRACE' &&
      !message.startsWith('Starting schema-engine')
    ) {
      log(`schema engine: ${message}`);
    }
  } catch {
    // not JSON: not ours to interpret
  }
}

/** The engine's message without the Rust span trace it appends. */
export function engineMessage(error: unknown): string {
  const message = messageOf(error);
  const trace = message.search(/\n\s+0: /);
  return (trace >= 0 ? message.slice(0, trace) : message).trim();
}
