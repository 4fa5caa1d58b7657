import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dataAccessProblems, domainRepositoryFiles } from '../../scripts/data-access-rules.mjs';

/**
 * The data access rules (docs/rules/tenancy.md) run in `npm run lint` over the
 * whole program it has type-checked (scripts/lint-types.mjs), which is where
 * the code is held to them. This runs them over a small project laid out like
 * ours, holding the mistakes they exist for and code that keeps them: checking
 * the rules, not the code, takes a program of a few files instead of all of it.
 */
const LAYOUT: Record<string, string> = {
  'libs/platform/database/src/generated/prisma/client.ts': `
    export class PrismaClient {
      toolPin = { findMany: (): string[] => [] };
      apiToken = { findFirst: (_query: unknown): string | undefined => undefined };
    }`,
  'libs/platform/database/src/database.ts': `
    import { PrismaClient } from './generated/prisma/client';
    export type Transaction = PrismaClient;
    export interface DatabaseHandle { readonly client: PrismaClient }`,
  'libs/platform/database/src/repository.ts': `
    import { PrismaClient } from './generated/prisma/client';
    export abstract class Repository {
      protected get client(): PrismaClient { return new PrismaClient(); }
    }`,
  'libs/auth/src/scope.ts': `
    export interface OrgScope { readonly organizationId: string }
    export interface WorkspaceScope extends OrgScope { readonly workspaceId: string }
    export interface SystemScope { readonly system: true }`,
};

const MISTAKES: Record<string, string> = {
  'libs/pool/src/leaky.service.ts': `import type { Transaction } from '../../platform/database/src/database';
export function leak(tx: Transaction) { return tx.toolPin.findMany(); }
`,
  'libs/pool/src/leaky.ts': `import { Repository } from '../../platform/database/src/repository';
export class Leaky extends Repository { rows() { return this.client.toolPin.findMany(); } }
`,
  'libs/pool/src/leaky.repository.ts': `import type { WorkspaceScope } from '../../auth/src/scope';
import { Repository } from '../../platform/database/src/repository';
export class LeakyRepository extends Repository {
  byHash(hash: string) { return this.client.apiToken.findFirst({ where: { tokenHash: hash } }); }
  scoped(scope: WorkspaceScope) { return this.client.toolPin.findMany(); }
}
`,
  'libs/pool/src/handle.service.ts': `import type { DatabaseHandle } from '../../platform/database/src/database';
export const whole = (handle: DatabaseHandle) => handle.client;
`,
};

const KEPT: Record<string, string> = {
  'libs/pool/src/pins.repository.ts': `import type { OrgScope, SystemScope, WorkspaceScope } from '../../auth/src/scope';
import type { Transaction } from '../../platform/database/src/database';
import { Repository } from '../../platform/database/src/repository';
export class PinsRepository extends Repository {
  list(scope: WorkspaceScope, tx?: Transaction) { return (tx ?? this.client).toolPin.findMany(); }
  ofOrganization(scope: OrgScope | undefined) { return this.client.toolPin.findMany(); }
  byHash(scope: SystemScope, hash: string) { return this.client.apiToken.findFirst({ hash }); }
  private unscopedHelper() { return this.client.toolPin.findMany(); }
}
`,
  'libs/pool/src/pins.service.ts': `import type { WorkspaceScope } from '../../auth/src/scope';
import type { PinsRepository } from './pins.repository';
export const pins = (repository: PinsRepository, scope: WorkspaceScope) => repository.list(scope);
`,
  // the database library itself holds the client
  'libs/platform/database/src/database.service.ts': `import type { DatabaseHandle } from './database';
export const ping = (handle: DatabaseHandle) => handle.client.toolPin.findMany();
`,
};

let root: string;
let program: ts.Program;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'data-access-'));
  for (const [file, text] of Object.entries({ ...LAYOUT, ...MISTAKES, ...KEPT })) {
    mkdirSync(dirname(join(root, file)), { recursive: true });
    writeFileSync(join(root, file), text);
  }
  program = ts.createProgram({
    rootNames: Object.keys({ ...MISTAKES, ...KEPT }).map((file) => join(root, file)),
    options: { strict: true, target: ts.ScriptTarget.ES2022, lib: ['lib.es2022.d.ts'], types: [], noEmit: true },
  });
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('data access rules', () => {
  it('read a program whose code is sound, as the lint does', () => {
    expect(ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))).toEqual(
      [],
    );
    expect(domainRepositoryFiles(ts, program, root).sort()).toEqual([
      'libs/pool/src/leaky.repository.ts',
      'libs/pool/src/pins.repository.ts',
    ]);
  });

  it('name each mistake they exist for by file and line, and nothing in code that keeps them', () => {
    expect(dataAccessProblems(ts, program, root).sort()).toEqual([
      expect.stringMatching(/^libs\/pool\/src\/handle\.service\.ts:2 takes the database handle's client$/),
      expect.stringMatching(/^libs\/pool\/src\/leaky\.repository\.ts:4 LeakyRepository\.byHash takes no tenant scope/),
      expect.stringMatching(/^libs\/pool\/src\/leaky\.service\.ts:2 queries the database \(tx\.toolPin\)/),
      expect.stringMatching(/^libs\/pool\/src\/leaky\.ts:2 extends Repository outside a \*\.repository\.ts file$/),
      expect.stringMatching(/^libs\/pool\/src\/leaky\.ts:2 queries the database \(this\.client\.toolPin\)/),
    ]);
  });
});
