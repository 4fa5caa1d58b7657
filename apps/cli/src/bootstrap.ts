import 'reflect-metadata';
import { join } from 'node:path';
import { ConsoleLogger, INestApplicationContext, LogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { slug as slugSchema } from '@aileron/auth';
import { ADMIN_TOKEN_FILE, loadConfigOrExit } from '@aileron/config';
import { openDatabase } from '@aileron/database';
import { DomainError } from '@aileron/errors';
import { BootstrapService } from '@aileron/tenancy';
import { BootstrapModule } from './bootstrap.module';
import { codedError } from './cli-error';
import { note, out } from './output';

/** Nest's warnings and errors, for the person at the terminal. */
class StderrLogger extends ConsoleLogger {
  protected override printMessages(
    messages: unknown[],
    context?: string,
    logLevel?: LogLevel,
    _stream?: 'stdout' | 'stderr',
    errorStack?: unknown,
  ): void {
    // stdout carries the token and nothing else
    super.printMessages(messages, context, logLevel, 'stderr', errorStack);
  }
}

export interface BootstrapOptions {
  org: string;
  name?: string;
  verbose?: boolean;
}

function validate(options: BootstrapOptions): { slug: string; name: string } {
  const slug = slugSchema.safeParse(options.org);
  if (!slug.success)
    throw codedError('VALIDATION_FAILED', `--org: ${slug.error.issues[0]?.message ?? 'is not a valid slug'}`);
  const name = (options.name ?? (slug.data === 'default' ? 'Default' : slug.data)).trim();
  if (name.length === 0 || name.length > 200) throw codedError('VALIDATION_FAILED', '--name: must be 1-200 characters');
  return { slug: slug.data, name };
}

/**
 * Server mode's first organisation and owner token, straight into the
 * database: there is no token yet to call the API with.
 */
export async function runBootstrap(options: BootstrapOptions): Promise<void> {
  const { slug, name } = validate(options);
  const config = loadConfigOrExit();
  if (config.mode !== 'server') {
    // The embedded mode makes its own organisation on first start; a second
    // one made here would not be the one it looks for.
    throw codedError(
      'SERVER_MODE_ONLY',
      'bootstrap is for the server mode (set DATABASE_URL); the embedded mode bootstraps itself on first start ' +
        `and writes the owner token to ${join(config.dataDir, ADMIN_TOKEN_FILE)}`,
    );
  }
  const log = options.verbose ? note : undefined;
  const database = await openDatabase(config.database, { log });
  let app: INestApplicationContext | undefined;
  try {
    app = await NestFactory.createApplicationContext(BootstrapModule.forRoot(config, database), {
      logger: new StderrLogger('aileron-cp', {
        logLevels: options.verbose ? ['error', 'warn', 'log'] : ['error', 'warn'],
      }),
      abortOnError: false,
    });
    const created = await app
      .get(BootstrapService)
      .bootstrapServer(slug, name)
      .catch((error: unknown) => {
        throw error instanceof DomainError ? codedError(error.code, error.detail) : error;
      });
    out(created.token);
    note(
      `created organisation "${created.organization}" with workspace "default"; the owner token above ` +
        "(also a platform operator's) is shown only this once: store it now",
    );
  } finally {
    await app?.close();
    await database.close();
  }
}
