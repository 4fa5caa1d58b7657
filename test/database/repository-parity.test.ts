import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ModulesContainer } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppModule } from '../../apps/control-plane/src/app.module';
import { SystemScopes } from '../../libs/auth/src/scope-issuer';
import { loadConfig } from '../../libs/platform/config/src';
import {
  DatabaseHandle,
  DatabaseService,
  openDatabase,
  Repository,
  Transaction,
} from '../../libs/platform/database/src';
import { TEST_ROOT_KEY } from '../support/control-plane';
import { Backend, BACKENDS, createPglite, createPostgresDatabase } from '../support/databases';

/**
 * Every method of every repository, run with the same arguments on the
 * embedded database (PGlite) and on PostgreSQL, in the same order, must
 * answer alike: the same rows, the same order, the same failure. The HTTP
 * suites run on one backend; this is where the other one's SQL is proven (a
 * raw query, a lock, an upsert, an array or JSON column behaving differently
 * would show here). The repositories are the app's own instances, found in
 * its module graph, so a new repository or method fails the last test below
 * until it has a case here.
 *
 * Answers are compared after ids the databases made are replaced by their
 * order of appearance and timestamps of now by a marker; times the cases
 * pass in (years away from now) stay as they are.
 */

type Method = (...args: any[]) => Promise<any>;

interface Side {
  backend: Backend;
  repositories: Map<string, Record<string, Method>>;
  db: DatabaseService;
  /** what earlier cases made, for later ones: each backend's own ids */
  w: Record<string, any>;
  close(): Promise<void>;
}

const SYSTEM = SystemScopes.system('repository parity');
const FUTURE = new Date('2040-01-01T00:00:00.000Z');
const PAST = new Date('2001-01-01T00:00:00.000Z');
/** a "now" for methods that take one, between PAST and FUTURE */
const THEN = new Date('2030-06-01T12:00:00.000Z');
const at = (seconds: number): Date => new Date(THEN.getTime() + seconds * 1000);
/** a first page, long enough for every row a case makes */
const PAGE = { take: 10 };
const uuid = (n: number): string => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const hash = (label: string): string => label.padEnd(64, '0');

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
const YEAR_MS = 365 * 86_400_000;

/** What a case answered, comparable across the two databases. */
function normalizer(): (value: unknown) => unknown {
  const ids = new Map<string, string>();
  const id = (raw: string): string => {
    const key = raw.toLowerCase();
    if (!ids.has(key)) ids.set(key, `<id ${ids.size + 1}>`);
    return ids.get(key)!;
  };
  const normalize = (value: unknown): unknown => {
    if (value instanceof Date)
      return Math.abs(value.getTime() - Date.now()) < 2 * YEAR_MS ? '<now>' : value.toISOString();
    if (typeof value === 'bigint') return `${value}n`;
    if (typeof value === 'string') return value.replace(UUID, id);
    if (Array.isArray(value)) return value.map(normalize);
    // a Map or Set of rows keeps the rows' order, which no query here promises: by the raw keys the cases chose
    if (value instanceof Map)
      return {
        map: [...value.entries()]
          .sort(([a], [b]) => (String(a) < String(b) ? -1 : 1))
          .map(([k, v]) => [normalize(k), normalize(v)]),
      };
    if (value instanceof Set) return { set: [...value].sort().map(normalize) };
    if (value && typeof value === 'object') {
      return Object.fromEntries(
        Object.keys(value)
          .sort()
          .map((key) => [key, normalize((value as Record<string, unknown>)[key])]),
      );
    }
    return value;
  };
  return normalize;
}

/**
 * A failure as the app sees it (prisma-errors.ts): Prisma's code and the
 * driver adapter's kind and SQLSTATE, or the error's own message. Not the
 * drivers' wording, nor how each adapter names the constraint.
 */
function failure(error: unknown): unknown {
  const e = error as {
    name?: string;
    code?: unknown;
    message?: string;
    meta?: { driverAdapterError?: { cause?: { kind?: string; originalCode?: string } } };
  };
  const cause = e.meta?.driverAdapterError?.cause;
  return {
    failed: e.name ?? 'Error',
    ...(typeof e.code === 'string'
      ? { code: e.code, kind: cause?.kind ?? null, sqlstate: cause?.originalCode ?? null }
      : { message: e.message }),
  };
}

async function openSide(backend: Backend): Promise<Side> {
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-parity-'));
  let handle: DatabaseHandle;
  let drop = async (): Promise<void> => {};
  const env: Record<string, string> = { AILERON_DATA_DIR: dataDir, LOG_LEVEL: 'warn', PORT: '1' };
  if (backend === 'pglite') {
    handle = await openDatabase({ kind: 'pglite-memory', pglite: await createPglite() }, { migrate: false });
  } else {
    const database = await createPostgresDatabase();
    drop = () => database.drop();
    Object.assign(env, { DATABASE_URL: database.url, AILERON_ROOT_KEY: TEST_ROOT_KEY });
    handle = await openDatabase({ kind: 'postgres', url: database.url, poolSize: 4 }, { migrate: false });
  }
  // the app's module graph, instantiated and never started: no listener, no sweep, no dispatcher writes behind the cases' backs
  const app = await Test.createTestingModule({ imports: [AppModule.forRoot(loadConfig(env), handle)] }).compile();
  const repositories = new Map<string, Record<string, Method>>();
  for (const module of app.get(ModulesContainer).values()) {
    for (const wrapper of module.providers.values()) {
      if (wrapper.instance instanceof Repository)
        repositories.set(wrapper.instance.constructor.name, wrapper.instance as unknown as Record<string, Method>);
    }
  }
  return {
    backend,
    repositories,
    db: app.get(DatabaseService),
    w: {},
    async close() {
      await handle.close();
      await drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** One case per repository method, in the order they run (later ones use what earlier ones made). */
const CASES: [repository: string, method: string, run: (s: Side) => Promise<unknown>][] = [];
function parity(repository: string, method: string, run: (s: Side) => Promise<unknown>): void {
  CASES.push([repository, method, run]);
}

const repo = (s: Side, name: string): Record<string, Method> => {
  const found = s.repositories.get(name);
  if (!found) throw new Error(`no ${name} in the app`);
  return found;
};
const tx = <T>(s: Side, fn: (tx: Transaction) => Promise<T>): Promise<T> => s.db.transaction(fn);
/** Runs each step, answering its result or its failure: a case may expect one to fail on both backends. */
async function steps(...runs: (() => Promise<unknown>)[]): Promise<unknown[]> {
  const answers: unknown[] = [];
  for (const run of runs) answers.push(await run().catch(failure));
  return answers;
}
/** Rows a method returns in no promised order, in one that does not depend on the database. */
const by = <T>(rows: T[], key: (row: T) => string): T[] =>
  [...rows].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));

// ---- tenancy: organisations, workspaces, users, memberships

parity('TenancyRepository', 'createOrganization', async (s) => {
  const t = repo(s, 'TenancyRepository');
  const [a, b, taken] = await steps(
    () => tx(s, (x) => t.createOrganization(SYSTEM, { slug: 'parity-a', name: 'Parity A' }, x)),
    () => tx(s, (x) => t.createOrganization(SYSTEM, { slug: 'parity-b', name: 'Parity B' }, x)),
    () => tx(s, (x) => t.createOrganization(SYSTEM, { slug: 'parity-a', name: 'Again' }, x)),
  );
  s.w.orgId = (a as { id: string }).id;
  s.w.org = SystemScopes.organization(s.w.orgId);
  s.w.orgB = SystemScopes.organization((b as { id: string }).id);
  return [a, b, taken];
});
parity('TenancyRepository', 'findOrganizationBySlug', async (s) => [
  await repo(s, 'TenancyRepository').findOrganizationBySlug(SYSTEM, 'parity-a'),
  await repo(s, 'TenancyRepository').findOrganizationBySlug(SYSTEM, 'nobody'),
]);
parity('TenancyRepository', 'countOrganizations', (s) => repo(s, 'TenancyRepository').countOrganizations(SYSTEM));
parity('TenancyRepository', 'getOrganization', async (s) =>
  steps(
    () => repo(s, 'TenancyRepository').getOrganization(s.w.org),
    () => repo(s, 'TenancyRepository').getOrganization(SystemScopes.organization(uuid(999))),
  ),
);
parity('TenancyRepository', 'createWorkspace', async (s) => {
  const t = repo(s, 'TenancyRepository');
  const answers = await steps(
    () => tx(s, (x) => t.createWorkspace(s.w.org, { slug: 'one', name: 'One' }, x)),
    () => tx(s, (x) => t.createWorkspace(s.w.org, { slug: 'two', name: 'Two', policyDefault: 'allow' }, x)),
    () => tx(s, (x) => t.createWorkspace(s.w.orgB, { slug: 'one', name: 'Theirs' }, x)),
    () => tx(s, (x) => t.createWorkspace(s.w.org, { slug: 'one', name: 'Again' }, x)),
  );
  const [one, two] = answers as { id: string; slug: string }[];
  s.w.ws = SystemScopes.workspace(s.w.orgId, { id: one!.id, slug: one!.slug });
  s.w.ws2 = SystemScopes.workspace(s.w.orgId, { id: two!.id, slug: two!.slug });
  return answers;
});
parity('TenancyRepository', 'listWorkspaces', (s) => repo(s, 'TenancyRepository').listWorkspaces(s.w.org, {}, PAGE));
parity('TenancyRepository', 'findWorkspaceBySlug', async (s) => [
  await repo(s, 'TenancyRepository').findWorkspaceBySlug(s.w.org, 'two'),
  await repo(s, 'TenancyRepository').findWorkspaceBySlug(s.w.org, 'three'),
]);
parity('TenancyRepository', 'getWorkspace', (s) => repo(s, 'TenancyRepository').getWorkspace(s.w.ws));
parity('TenancyRepository', 'updateWorkspace', (s) =>
  tx(s, (x) => repo(s, 'TenancyRepository').updateWorkspace(s.w.ws, { name: 'One, renamed' }, x)),
);
parity('TenancyRepository', 'createUser', async (s) => {
  const t = repo(s, 'TenancyRepository');
  const answers = await steps(
    () => tx(s, (x) => t.createUser(s.w.org, { email: 'ada@example.com', name: 'Ada', role: 'admin' }, x)),
    () => tx(s, (x) => t.createUser(s.w.org, { email: 'Bob@Example.com', name: null, role: 'member' }, x)),
    () => tx(s, (x) => t.createUser(s.w.org, { email: 'carol@example.com', name: 'Carol', role: 'member' }, x)),
  );
  [s.w.ada, s.w.bob, s.w.carol] = (answers as { id: string }[]).map((u) => u.id);
  return answers;
});
parity('TenancyRepository', 'listUsers', (s) => repo(s, 'TenancyRepository').listUsers(s.w.org, PAGE));
parity('TenancyRepository', 'findUser', async (s) => [
  await repo(s, 'TenancyRepository').findUser(s.w.org, s.w.ada),
  await repo(s, 'TenancyRepository').findUser(s.w.orgB, s.w.ada),
]);
parity('TenancyRepository', 'updateUserRole', (s) =>
  tx(s, (x) => repo(s, 'TenancyRepository').updateUserRole(s.w.org, s.w.bob, 'auditor', x)),
);
parity('TenancyRepository', 'putMember', async (s) => {
  const t = repo(s, 'TenancyRepository');
  return steps(
    () => tx(s, (x) => t.putMember(s.w.ws, s.w.ada, 'member', x)),
    () => tx(s, (x) => t.putMember(s.w.ws, s.w.ada, 'approver', x)),
    () => tx(s, (x) => t.putMember(s.w.ws, s.w.carol, 'member', x)),
  );
});
parity('TenancyRepository', 'listMembers', (s) => repo(s, 'TenancyRepository').listMembers(s.w.ws, PAGE));
parity('TenancyRepository', 'lockMember', (s) =>
  tx(s, async (x) => [
    await repo(s, 'TenancyRepository').lockMember(s.w.ws, s.w.ada, x),
    await repo(s, 'TenancyRepository').lockMember(s.w.ws, s.w.bob, x),
  ]),
);
parity('TenancyRepository', 'deleteMember', async (s) => {
  const t = repo(s, 'TenancyRepository');
  return [
    await tx(s, (x) => t.deleteMember(s.w.ws, s.w.carol, x)),
    await tx(s, (x) => t.deleteMember(s.w.ws, s.w.carol, x)),
    await t.listMembers(s.w.ws, PAGE),
  ];
});
const IDENTITY_PROVIDER = {
  issuer: 'https://idp.parity.example',
  jwksUrl: 'https://idp.parity.example/jwks',
  audience: 'aileron',
  allowAnyAudience: false,
  trustUnverifiedEmail: false,
  subjectClaim: 'sub',
  emailClaim: 'email',
  nameClaim: 'name',
  roleClaim: 'aileron_role',
  roleMapping: { admins: 'admin', everyone: 'member' },
  defaultRole: 'member',
  groupsClaim: 'groups',
  clientId: null,
  clientSecretSealed: null,
  scopes: ['openid', 'email'],
};
parity('TenancyRepository', 'putIdentityProvider', async (s) => {
  const t = repo(s, 'TenancyRepository');
  await tx(s, (x) => t.putIdentityProvider(s.w.org, { ...IDENTITY_PROVIDER, audience: null }, x));
  await tx(s, (x) => t.putIdentityProvider(s.w.org, IDENTITY_PROVIDER, x));
  return [
    await t.getIdentityProvider(s.w.org),
    await steps(() => tx(s, (x) => t.putIdentityProvider(s.w.orgB, IDENTITY_PROVIDER, x))),
  ];
});
parity('TenancyRepository', 'getIdentityProvider', async (s) => [
  await repo(s, 'TenancyRepository').getIdentityProvider(s.w.org),
  await repo(s, 'TenancyRepository').getIdentityProvider(s.w.orgB),
]);

// ---- auth: tokens, people, sign-in

parity('AuthRepository', 'createToken', async (s) => {
  const a = repo(s, 'AuthRepository');
  const answers = await steps(
    () =>
      tx(s, (x) =>
        a.createToken(
          s.w.org,
          {
            name: 'owner',
            role: 'owner',
            workspaceId: null,
            hash: hash('t1'),
            prefix: 'ail_1',
            createdBy: null,
            expiresAt: null,
            platformOperator: true,
          },
          x,
        ),
      ),
    () =>
      tx(s, (x) =>
        a.createToken(
          s.w.org,
          {
            name: 'ci',
            role: 'member',
            workspaceId: s.w.ws.workspaceId,
            hash: hash('t2'),
            prefix: 'ail_2',
            createdBy: `user:${s.w.ada}`,
            expiresAt: FUTURE,
          },
          x,
        ),
      ),
    () =>
      tx(s, (x) =>
        a.createToken(
          s.w.org,
          {
            name: 'again',
            role: 'member',
            workspaceId: null,
            hash: hash('t1'),
            prefix: 'ail_3',
            createdBy: null,
            expiresAt: null,
          },
          x,
        ),
      ),
  );
  [s.w.token1, s.w.token2] = (answers as { id: string }[]).map((t) => t.id);
  return answers;
});
parity('AuthRepository', 'findTokenByHash', async (s) => [
  await repo(s, 'AuthRepository').findTokenByHash(SYSTEM, hash('t2')),
  await repo(s, 'AuthRepository').findTokenByHash(SYSTEM, hash('none')),
]);
parity('AuthRepository', 'findTokenById', async (s) => [
  await repo(s, 'AuthRepository').findTokenById(s.w.org, s.w.token1),
  await repo(s, 'AuthRepository').findTokenById(s.w.orgB, s.w.token1),
]);
parity('AuthRepository', 'touchToken', async (s) => {
  await repo(s, 'AuthRepository').touchToken(s.w.org, s.w.token1, at(1));
  await repo(s, 'AuthRepository').touchToken(s.w.orgB, s.w.token2, at(2));
  return [
    (await repo(s, 'AuthRepository').findTokenById(s.w.org, s.w.token1))?.lastUsedAt,
    (await repo(s, 'AuthRepository').findTokenById(s.w.org, s.w.token2))?.lastUsedAt,
  ];
});
parity('AuthRepository', 'listTokens', async (s) => [
  await repo(s, 'AuthRepository').listTokens(s.w.org, {}, PAGE),
  await repo(s, 'AuthRepository').listTokens(s.w.org, { workspaceId: s.w.ws.workspaceId }, PAGE),
]);
parity('AuthRepository', 'revokeToken', async (s) => {
  const a = repo(s, 'AuthRepository');
  await tx(s, (x) => a.revokeToken(s.w.org, s.w.token2, at(3), x));
  await tx(s, (x) => a.revokeToken(s.w.org, s.w.token2, at(4), x));
  return (await a.findTokenById(s.w.org, s.w.token2))?.revokedAt;
});
parity('AuthRepository', 'findUser', async (s) => [
  await repo(s, 'AuthRepository').findUser(s.w.org, s.w.ada),
  await repo(s, 'AuthRepository').findUser(s.w.org, uuid(998)),
]);
parity('AuthRepository', 'findIdentityProviderByIssuer', async (s) => [
  await repo(s, 'AuthRepository').findIdentityProviderByIssuer(SYSTEM, IDENTITY_PROVIDER.issuer),
  await repo(s, 'AuthRepository').findIdentityProviderByIssuer(SYSTEM, 'https://elsewhere.example'),
]);
parity('AuthRepository', 'findIdentityProvider', async (s) => [
  await repo(s, 'AuthRepository').findIdentityProvider(s.w.org),
  await repo(s, 'AuthRepository').findIdentityProvider(s.w.orgB),
]);
parity('AuthRepository', 'findOrganizationIdBySlug', async (s) => [
  await repo(s, 'AuthRepository').findOrganizationIdBySlug(SYSTEM, 'parity-b'),
  await repo(s, 'AuthRepository').findOrganizationIdBySlug(SYSTEM, 'nobody'),
]);
parity('AuthRepository', 'upsertUserFromIdentity', async (s) => {
  const a = repo(s, 'AuthRepository');
  const person = {
    subject: 'sub-dana',
    email: 'dana@example.com',
    emailVerified: true,
    name: 'Dana',
    role: null,
    groups: ['eng'],
  };
  const answers = [
    // a new person; the same subject again, with a role and newer groups; an old credential's groups do not win
    await a.upsertUserFromIdentity(
      s.w.org,
      person,
      { defaultRole: 'member', trustedEmail: 'dana@example.com' },
      at(10),
      at(9),
    ),
    await a.upsertUserFromIdentity(
      s.w.org,
      { ...person, role: 'admin', groups: ['eng', 'ops'] },
      { defaultRole: 'member', trustedEmail: null },
      at(20),
      at(19),
    ),
    await a.upsertUserFromIdentity(
      s.w.org,
      { ...person, groups: ['stale'] },
      { defaultRole: 'member', trustedEmail: null },
      at(30),
      at(1),
    ),
    // a pre-provisioned user linked by a trusted e-mail; an untrusted one is refused
    await a.upsertUserFromIdentity(
      s.w.org,
      { ...person, subject: 'sub-ada', email: 'ada@example.com' },
      { defaultRole: 'member', trustedEmail: 'ada@example.com' },
      at(40),
      at(40),
    ),
    await a.upsertUserFromIdentity(
      s.w.org,
      { ...person, subject: 'sub-carol', email: 'carol@example.com', emailVerified: false },
      { defaultRole: 'member', trustedEmail: null },
      at(50),
      at(50),
    ),
  ];
  s.w.dana = (answers[0] as { id: string }).id;
  return [answers, await repo(s, 'TenancyRepository').listUsers(s.w.org, PAGE)];
});
parity('AuthRepository', 'createBrowserSession', async (s) => {
  const a = repo(s, 'AuthRepository');
  await a.createBrowserSession(s.w.org, { userId: s.w.ada, tokenHash: hash('ls-old'), expiresAt: at(5) }, at(0));
  // a sign-in sweeps the sessions that have lapsed by its time
  await a.createBrowserSession(s.w.org, { userId: s.w.ada, tokenHash: hash('ls1'), expiresAt: FUTURE }, at(10));
  return [
    await a.findBrowserSession(SYSTEM, hash('ls-old')),
    await steps(() =>
      a.createBrowserSession(s.w.org, { userId: s.w.ada, tokenHash: hash('ls1'), expiresAt: FUTURE }, at(11)),
    ),
  ];
});
parity('AuthRepository', 'findBrowserSession', async (s) => [
  await repo(s, 'AuthRepository').findBrowserSession(SYSTEM, hash('ls1')),
  await repo(s, 'AuthRepository').findBrowserSession(SYSTEM, hash('none')),
]);
parity('AuthRepository', 'deleteBrowserSession', async (s) => {
  const a = repo(s, 'AuthRepository');
  await a.createBrowserSession(s.w.org, { userId: s.w.ada, tokenHash: hash('ls-out'), expiresAt: FUTURE }, at(12));
  // another organisation's scope deletes nothing of this one's
  await a.deleteBrowserSession(s.w.orgB, hash('ls-out'));
  const kept = await a.findBrowserSession(SYSTEM, hash('ls-out'));
  await a.deleteBrowserSession(s.w.org, hash('ls-out'));
  return [kept, await a.findBrowserSession(SYSTEM, hash('ls-out')), await a.findBrowserSession(SYSTEM, hash('ls1'))];
});
parity('AuthRepository', 'deleteBrowserSessionsOfUser', async (s) => {
  const a = repo(s, 'AuthRepository');
  for (const n of [1, 2])
    await a.createBrowserSession(
      s.w.org,
      { userId: s.w.bob, tokenHash: hash(`ls-bob${n}`), expiresAt: FUTURE },
      at(13),
    );
  return [
    await a.deleteBrowserSessionsOfUser(s.w.orgB, s.w.bob),
    await a.deleteBrowserSessionsOfUser(s.w.org, s.w.bob),
    await a.findBrowserSession(SYSTEM, hash('ls-bob1')),
    await a.findBrowserSession(SYSTEM, hash('ls1')),
  ];
});
parity('AuthRepository', 'ensureLocalOwner', async (s) => {
  const a = repo(s, 'AuthRepository');
  const first = await a.ensureLocalOwner(s.w.org, 'local:parity', at(14));
  const again = await a.ensureLocalOwner(s.w.org, 'local:parity', at(15));
  return [first === again, await repo(s, 'TenancyRepository').findUser(s.w.org, first)];
});
parity('AuthRepository', 'findOrganization', async (s) => [
  await repo(s, 'AuthRepository').findOrganization(s.w.org),
  await repo(s, 'AuthRepository').findOrganization(SystemScopes.organization(uuid(997))),
]);
parity('AuthRepository', 'findWorkspaceById', async (s) => [
  await repo(s, 'AuthRepository').findWorkspaceById(s.w.org, s.w.ws.workspaceId),
  await repo(s, 'AuthRepository').findWorkspaceById(s.w.orgB, s.w.ws.workspaceId),
]);
parity('AuthRepository', 'findWorkspaceBySlug', async (s) => [
  await repo(s, 'AuthRepository').findWorkspaceBySlug(s.w.org, 'one'),
  await repo(s, 'AuthRepository').findWorkspaceBySlug(s.w.orgB, 'two'),
]);
parity('AuthRepository', 'listWorkspaces', (s) => repo(s, 'AuthRepository').listWorkspaces(s.w.org));
parity('TenancyRepository', 'deleteIdentityProvider', async (s) => {
  const t = repo(s, 'TenancyRepository');
  return [
    await tx(s, (x) => t.deleteIdentityProvider(s.w.org, x)),
    await tx(s, (x) => t.deleteIdentityProvider(s.w.org, x)),
    await t.getIdentityProvider(s.w.org),
  ];
});

// ---- catalog

const DEFINITION = {
  mode: 'remote',
  transport: 'stdio',
  command: 'node',
  args: ['server.js'],
  env: { LEVEL: 'debug' },
};
parity('CatalogRepository', 'ensureEntry', async (s) => {
  const c = repo(s, 'CatalogRepository');
  s.w.entry = await tx(s, (x) => c.ensureEntry(s.w.org, 'github', x));
  return [
    s.w.entry,
    await tx(s, (x) => c.ensureEntry(s.w.org, 'github', x)),
    await tx(s, (x) => c.ensureEntry(s.w.orgB, 'github', x)),
  ];
});
parity('CatalogRepository', 'createVersion', async (s) => {
  const c = repo(s, 'CatalogRepository');
  return steps(
    () =>
      tx(s, (x) =>
        c.createVersion(s.w.org, s.w.entry, { version: '1.0.0', definition: DEFINITION, createdBy: 'token:parity' }, x),
      ),
    () =>
      tx(s, (x) =>
        c.createVersion(
          s.w.org,
          s.w.entry,
          { version: '1.1.0', definition: { ...DEFINITION, args: ['v1.1'] }, createdBy: 'token:parity' },
          x,
        ),
      ),
    () =>
      tx(s, (x) =>
        c.createVersion(s.w.org, s.w.entry, { version: '1.0.0', definition: DEFINITION, createdBy: 'token:parity' }, x),
      ),
  );
});
parity('CatalogRepository', 'listEntries', async (s) => {
  const entries = (await repo(s, 'CatalogRepository').listEntries(s.w.org, PAGE)) as {
    versions: { version: string }[];
  }[];
  // versions come in no promised order
  return entries.map((e) => ({ ...e, versions: by(e.versions, (v) => v.version) }));
});
parity('CatalogRepository', 'findEntry', async (s) => {
  const found = (await tx(s, (x) => repo(s, 'CatalogRepository').findEntry(s.w.org, 'github', x))) as {
    versions: { version: string }[];
  };
  return [
    { ...found, versions: by(found.versions, (v) => v.version) },
    await repo(s, 'CatalogRepository').findEntry(s.w.org, 'gitlab'),
  ];
});
parity('CatalogRepository', 'setEnabled', async (s) => {
  const c = repo(s, 'CatalogRepository');
  await tx(s, (x) => c.setEnabled(s.w.org, s.w.entry, false, 'incident 42', x));
  const off = (await c.findEntry(s.w.org, 'github')) as {
    enabled: boolean;
    disabledReason: string | null;
    disabledAt: Date | null;
  };
  await tx(s, (x) => c.setEnabled(s.w.org, s.w.entry, true, 'ignored', x));
  const on = (await c.findEntry(s.w.org, 'github')) as typeof off;
  return [
    off.enabled,
    off.disabledReason,
    off.disabledAt,
    on.enabled,
    on.disabledReason,
    on.disabledAt,
    await steps(() => tx(s, (x) => c.setEnabled(s.w.orgB, s.w.entry, false, null, x))),
  ];
});
parity('CatalogRepository', 'assign', async (s) => {
  const c = repo(s, 'CatalogRepository');
  return steps(
    () => tx(s, (x) => c.assign(s.w.ws, s.w.entry, '1.0.0', 'token:parity', x)),
    () => tx(s, (x) => c.assign(s.w.ws2, s.w.entry, '1.1.0', 'token:parity', x)),
    () => tx(s, (x) => c.assign(s.w.ws, s.w.entry, '9.9.9', 'token:parity', x)),
  );
});
parity('CatalogRepository', 'setRollout', async (s) => {
  const c = repo(s, 'CatalogRepository');
  await tx(s, (x) =>
    c.setRollout(
      s.w.ws,
      s.w.entry,
      { version: '1.1.0', gateways: ['gw-1'], groups: ['canary'], percent: 25 },
      'token:rollout',
      x,
    ),
  );
  return c.assignments(s.w.ws);
});
parity('CatalogRepository', 'assignments', async (s) => [
  await tx(s, (x) => repo(s, 'CatalogRepository').assignments(s.w.ws2, x)),
  await repo(s, 'CatalogRepository').assignments(s.w.ws),
]);
parity('CatalogRepository', 'workspacesUsing', async (s) =>
  by(
    (await tx(s, (x) => repo(s, 'CatalogRepository').workspacesUsing(s.w.org, s.w.entry, x))) as { slug: string }[],
    (w) => w.slug,
  ),
);
parity('CatalogRepository', 'unassign', async (s) => {
  const c = repo(s, 'CatalogRepository');
  return [
    await tx(s, (x) => c.unassign(s.w.ws2, s.w.entry, x)),
    await tx(s, (x) => c.unassign(s.w.ws2, s.w.entry, x)),
    await c.assignments(s.w.ws2),
  ];
});

// ---- gateways

parity('GatewayRepository', 'createEnrollmentCode', async (s) => {
  const g = repo(s, 'GatewayRepository');
  const answers = await steps(
    () =>
      tx(s, (x) =>
        g.createEnrollmentCode(
          s.w.ws,
          {
            codeHash: hash('code1'),
            groups: ['canary'],
            expiresAt: FUTURE,
            createdBy: 'token:parity',
            tokenExpiresInSeconds: 600,
          },
          x,
        ),
      ),
    () =>
      tx(s, (x) =>
        g.createEnrollmentCode(
          s.w.ws,
          {
            codeHash: hash('code2'),
            groups: [],
            expiresAt: PAST,
            createdBy: 'token:parity',
            tokenExpiresInSeconds: null,
          },
          x,
        ),
      ),
    () =>
      tx(s, (x) =>
        g.createEnrollmentCode(
          s.w.ws,
          { codeHash: hash('code1'), groups: [], expiresAt: FUTURE, createdBy: 'token:parity' },
          x,
        ),
      ),
  );
  s.w.code1 = (answers[0] as { id: string }).id;
  return answers;
});
parity('GatewayRepository', 'consumeEnrollmentCode', async (s) => {
  const g = repo(s, 'GatewayRepository');
  return [
    await tx(s, (x) => g.consumeEnrollmentCode(SYSTEM, hash('code1'), THEN, x)),
    await tx(s, (x) => g.consumeEnrollmentCode(SYSTEM, hash('code1'), THEN, x)),
    await tx(s, (x) => g.consumeEnrollmentCode(SYSTEM, hash('code2'), THEN, x)),
  ];
});
parity('GatewayRepository', 'enrollmentCodeState', async (s) => {
  const g = repo(s, 'GatewayRepository');
  return [
    await g.enrollmentCodeState(SYSTEM, hash('code1'), THEN),
    await g.enrollmentCodeState(SYSTEM, hash('code2'), THEN),
    await g.enrollmentCodeState(SYSTEM, hash('code9'), THEN),
  ];
});
parity('GatewayRepository', 'createGateway', async (s) => {
  const g = repo(s, 'GatewayRepository');
  const tenant = { organizationId: s.w.orgId, workspaceId: s.w.ws.workspaceId };
  const answers = await steps(
    () =>
      tx(s, (x) =>
        g.createGateway(
          SYSTEM,
          tenant,
          {
            name: 'ada-laptop',
            groups: ['canary'],
            tokenHash: hash('gw1'),
            prefix: 'ail_gw_1',
            enrollmentCodeId: s.w.code1,
            tokenExpiresAt: FUTURE,
          },
          x,
        ),
      ),
    () =>
      tx(s, (x) =>
        g.createGateway(
          SYSTEM,
          tenant,
          { name: 'again', groups: [], tokenHash: hash('gw1'), prefix: 'ail_gw_2', enrollmentCodeId: s.w.code1 },
          x,
        ),
      ),
  );
  s.w.gateway = (answers[0] as { id: string }).id;
  return answers;
});
parity('GatewayRepository', 'findGatewayByTokenHash', async (s) => [
  await repo(s, 'GatewayRepository').findGatewayByTokenHash(SYSTEM, hash('gw1')),
  await repo(s, 'GatewayRepository').findGatewayByTokenHash(SYSTEM, hash('gw9')),
]);
parity('GatewayRepository', 'lockGateway', async (s) => [
  await tx(s, (x) => repo(s, 'GatewayRepository').lockGateway(s.w.ws, s.w.gateway, x)),
  await tx(s, (x) => repo(s, 'GatewayRepository').lockGateway(s.w.ws2, s.w.gateway, x)),
  await tx(s, (x) => repo(s, 'GatewayRepository').lockGateway(s.w.ws, uuid(995), x)),
]);
parity('GatewayRepository', 'replaceToken', async (s) => {
  const g = repo(s, 'GatewayRepository');
  const rotate = (scope: unknown, current: string, previous: string | null) =>
    tx(s, (x) =>
      g.replaceToken(
        scope,
        s.w.gateway,
        {
          tokenHash: hash(current),
          prefix: `ail_gw_${current}`,
          tokenExpiresAt: FUTURE,
          previousTokenHash: previous && hash(previous),
          previousTokenValidUntil: previous ? at(600) : null,
        },
        x,
      ),
    );
  await rotate(s.w.ws, 'gw2', 'gw1');
  // another workspace's scope changes nothing
  await rotate(s.w.ws2, 'gw8', null);
  const answers = [
    await g.findGatewayByTokenHash(SYSTEM, hash('gw1')),
    await g.findGatewayByTokenHash(SYSTEM, hash('gw2')),
    await g.findGatewayByTokenHash(SYSTEM, hash('gw8')),
  ];
  // back to the token the later cases know, with no grace left for the other
  await rotate(s.w.ws, 'gw1', null);
  return [...answers, await g.findGatewayByTokenHash(SYSTEM, hash('gw2')), await g.findGateway(s.w.ws, s.w.gateway)];
});
parity('GatewayRepository', 'touchGateway', async (s) => {
  await repo(s, 'GatewayRepository').touchGateway(s.w.org, s.w.gateway, at(60));
  await repo(s, 'GatewayRepository').touchGateway(s.w.orgB, s.w.gateway, at(70));
  return ((await repo(s, 'GatewayRepository').findGateway(s.w.ws, s.w.gateway)) as { lastSeenAt: Date }).lastSeenAt;
});
parity('GatewayRepository', 'listGateways', async (s) => [
  await repo(s, 'GatewayRepository').listGateways(s.w.ws, {}, PAGE),
  await repo(s, 'GatewayRepository').listGateways(s.w.ws2, {}, PAGE),
  await repo(s, 'GatewayRepository').listGateways(s.w.ws, { enrolledBy: ['token:parity'] }, PAGE),
  await repo(s, 'GatewayRepository').listGateways(s.w.ws, { enrolledBy: ['user:nobody'] }, PAGE),
]);
parity('GatewayRepository', 'gatewayActivity', async (s) => [
  await repo(s, 'GatewayRepository').gatewayActivity(s.w.ws, at(0), 10),
  await repo(s, 'GatewayRepository').gatewayActivity(s.w.ws, at(3600), 10),
  await repo(s, 'GatewayRepository').gatewayActivity(s.w.ws2, at(0), 10),
]);
parity('GatewayRepository', 'findGateway', async (s) => [
  await tx(s, (x) => repo(s, 'GatewayRepository').findGateway(s.w.ws, s.w.gateway, x)),
  await repo(s, 'GatewayRepository').findGateway(s.w.ws2, s.w.gateway),
]);
parity('GatewayRepository', 'updateGateway', async (s) => {
  const g = repo(s, 'GatewayRepository');
  await tx(s, (x) => g.updateGateway(s.w.ws, s.w.gateway, { groups: ['stable', 'eu'] }, x));
  await tx(s, (x) => g.updateGateway(s.w.ws2, s.w.gateway, { groups: ['elsewhere'] }, x));
  await tx(s, (x) => g.updateGateway(s.w.ws, s.w.gateway, { revokedAt: at(80) }, x));
  return g.findGateway(s.w.ws, s.w.gateway);
});
parity('GatewayRepository', 'settings', (s) => repo(s, 'GatewayRepository').settings(s.w.org));
parity('GatewayRepository', 'saveSettings', async (s) => {
  const g = repo(s, 'GatewayRepository');
  await tx(s, (x) =>
    g.saveSettings(s.w.org, { allowLocalServers: false, offlineMode: 'fail_closed', maxStaleSeconds: 60 }, x),
  );
  const first = await g.settings(s.w.org);
  await tx(s, (x) =>
    g.saveSettings(s.w.org, { allowLocalServers: true, offlineMode: 'cached', maxStaleSeconds: 120 }, x),
  );
  return [first, await g.settings(s.w.org), await g.settings(s.w.orgB)];
});
parity('GatewayRepository', 'organizationSlug', async (s) =>
  steps(
    () => repo(s, 'GatewayRepository').organizationSlug(s.w.org),
    () => repo(s, 'GatewayRepository').organizationSlug(SystemScopes.organization(uuid(996))),
  ),
);

// ---- the outbox and the event history read from it

parity('OutboxRepository', 'record', async (s) => {
  const o = repo(s, 'OutboxRepository');
  const unleased = (await tx(s, (x) =>
    o.record(
      x,
      [
        {
          topic: 'parity.first',
          organizationId: s.w.orgId,
          workspaceId: s.w.ws.workspaceId,
          payload: { n: 1, text: 'é ✓' },
        },
        { topic: 'parity.second', organizationId: s.w.orgId, payload: { n: 2, nested: { list: [1, 2] } } },
        { topic: 'parity.platform', payload: {} },
        // stored as its audit record's id and the rest: read back so, for OutboxService to fill in
        {
          topic: 'parity.announced',
          organizationId: s.w.orgId,
          workspaceId: s.w.ws.workspaceId,
          payload: { workspace: 'parity', call: 'all of it' },
          fromAuditRecord: { id: uuid(101), rest: { workspace: 'parity' } },
        },
      ],
      { leased: false },
    ),
  )) as { id: string }[];
  const leased = (await tx(s, (x) =>
    o.record(
      x,
      [{ topic: 'parity.leased', organizationId: s.w.orgId, workspaceId: s.w.ws.workspaceId, payload: { n: 4 } }],
      { leased: true },
    ),
  )) as { id: string }[];
  s.w.messages = unleased.map((m) => m.id);
  s.w.leased = leased.map((m) => m.id);
  return [unleased, leased, await tx(s, (x) => o.record(x, [], { leased: false }))];
});
parity('OutboxRepository', 'claimDue', async (s) => {
  const o = repo(s, 'OutboxRepository');
  // the leased message is not due until its lease runs out, or one leased before a given time is asked for
  return [
    await o.claimDue(60_000, 2),
    await o.claimDue(60_000, 10),
    await o.claimDue(60_000, 10),
    await o.claimDue(60_000, 10, FUTURE),
  ];
});
parity('OutboxRepository', 'release', async (s) => {
  const o = repo(s, 'OutboxRepository');
  await o.release([s.w.messages[0]]);
  await o.release([]);
  return o.claimDue(60_000, 10);
});
parity('OutboxRepository', 'deliverOnce', async (s) => {
  const o = repo(s, 'OutboxRepository');
  const handled: unknown[] = [];
  const effect = async (messages: unknown[]) => void handled.push(messages);
  const first = await o.deliverOnce(s.w.messages.slice(0, 2), 'parity-consumer', effect);
  const again = await o.deliverOnce(s.w.messages, 'parity-consumer', effect);
  const failing = await steps(() =>
    o.deliverOnce([s.w.messages[2]], 'failing-consumer', async () => {
      throw new Error('the effect failed');
    }),
  );
  // the failed effect's mark rolled back with it
  const retried = await o.deliverOnce([s.w.messages[2]], 'failing-consumer', effect);
  return [first, again, failing, retried, handled];
});
parity('OutboxRepository', 'deliverAndComplete', async (s) => {
  const o = repo(s, 'OutboxRepository');
  const handled: unknown[] = [];
  const effect = async (messages: unknown[]) => void handled.push(messages);
  return [await o.deliverAndComplete(s.w.leased, effect), await o.deliverAndComplete(s.w.leased, effect), handled];
});
parity('OutboxRepository', 'read', async (s) => [
  await repo(s, 'OutboxRepository').read([...s.w.messages].reverse()),
  await repo(s, 'OutboxRepository').read(['999999']),
]);
parity('OutboxRepository', 'completeIfDelivered', async (s) => {
  const o = repo(s, 'OutboxRepository');
  await o.completeIfDelivered(s.w.messages, ['parity-consumer', 'failing-consumer']);
  await o.completeIfDelivered(s.w.messages, ['parity-consumer']);
  await o.completeIfDelivered([], ['parity-consumer']);
  // what is not complete is due again once its lease is ignored
  return o.claimDue(60_000, 10, FUTURE);
});
parity('OutboxRepository', 'recordCompleted', async (s) => {
  const o = repo(s, 'OutboxRepository');
  const written = await tx(s, (x) =>
    o.recordCompleted(x, [{ topic: 'parity.completed', organizationId: s.w.orgId, payload: { n: 7 } }], 'parity-quiet'),
  );
  const rows = await tx(
    s,
    (x) => x.$queryRaw`
      SELECT topic, payload, dispatch_count, completed_at IS NOT NULL AS done FROM outbox_messages
      WHERE topic = 'parity.completed' ORDER BY id`,
  );
  return [written, rows];
});
parity('OutboxRepository', 'reserveIds', async (s) => {
  const o = repo(s, 'OutboxRepository');
  const reserved = await tx(s, (x) => o.reserveIds(x, 3));
  // a message written after them takes the next id: the reserved ones stay unused by rows
  const [next] = await tx(s, (x) => o.record(x, [{ topic: 'parity.reserved', payload: {} }], { leased: false }));
  const ids = [...reserved, next!.id].map(BigInt);
  return [reserved.length, ids.slice(1).map((id, i) => id - ids[i]!), await tx(s, (x) => o.reserveIds(x, 1))];
});
parity('OutboxRepository', 'recordHandled', async (s) => {
  const o = repo(s, 'OutboxRepository');
  const handled: unknown[] = [];
  const effect = async (messages: unknown[]) => void handled.push(messages);
  const written = await tx(s, (x) =>
    o.recordHandled(
      x,
      [
        { topic: 'parity.inline', organizationId: s.w.orgId, payload: { n: 5 } },
        { topic: 'parity.inline', organizationId: s.w.orgId, payload: { n: 6 } },
      ],
      'parity-inline',
      effect,
    ),
  );
  // an effect that fails: its savepoint is rolled back, and the transaction goes on to commit what else it writes
  const failed = await tx(s, async (x) => {
    const outcome = await o.recordHandled(x, [{ topic: 'parity.inline-failed', payload: {} }], 'parity-inline', () =>
      Promise.reject(new Error('the effect failed')),
    );
    const after = await o.record(x, [{ topic: 'parity.inline-after', payload: {} }], { leased: true });
    return ['failed' in outcome ? String(outcome.failed) : outcome, after];
  });
  const rows = await tx(
    s,
    (x) => x.$queryRaw`
      SELECT topic, payload, dispatch_count, completed_at IS NOT NULL AS done FROM outbox_messages
      WHERE topic LIKE 'parity.inline%' ORDER BY id`,
  );
  return [written, failed, handled, rows];
});
parity('EventsRepository', 'after', async (s) => {
  const e = repo(s, 'EventsRepository');
  return [
    await e.after(s.w.ws, 0n, 10),
    await e.after(s.w.ws, BigInt(s.w.messages[0]), 1),
    await e.after(s.w.ws2, 0n, 10),
  ];
});

// ---- installation keys

parity('SigningKeysRepository', 'create', async (s) => {
  const k = repo(s, 'SigningKeysRepository');
  return steps(
    () => k.create('parity', { id: 'key-1', publicKey: 'public-1', privateKey: 'sealed-1' }),
    () => k.create('parity', { id: 'key-2', publicKey: 'public-2', privateKey: 'sealed-2' }),
    () => k.create('other', { id: 'key-3', publicKey: 'public-3', privateKey: 'sealed-3' }),
    () => k.create('parity', { id: 'key-1', publicKey: 'again', privateKey: 'again' }),
  );
});
parity('SigningKeysRepository', 'list', async (s) => [
  await repo(s, 'SigningKeysRepository').list('parity'),
  await repo(s, 'SigningKeysRepository').list('nothing'),
]);
parity('SigningKeysRepository', 'retireAllBut', async (s) => {
  await repo(s, 'SigningKeysRepository').retireAllBut('parity', ['key-2'], at(100));
  await repo(s, 'SigningKeysRepository').retireAllBut('parity', ['key-2'], at(200));
  return repo(s, 'SigningKeysRepository').list('parity');
});
parity('SigningKeysRepository', 'replacePrivateKey', async (s) =>
  steps(
    () => repo(s, 'SigningKeysRepository').replacePrivateKey('key-1', 'resealed-1'),
    () => repo(s, 'SigningKeysRepository').replacePrivateKey('key-9', 'x'),
  ),
);
parity('SigningKeysRepository', 'all', async (s) =>
  by((await repo(s, 'SigningKeysRepository').all()) as { id: string }[], (k) => k.id),
);
parity('InstallationKeysRepository', 'getOrCreate', async (s) => {
  const k = repo(s, 'InstallationKeysRepository');
  return [
    await k.getOrCreate('parity-secret', () => 'first'),
    await k.getOrCreate('parity-secret', () => 'second'),
    await k.getOrCreate('parity-other', () => 'other'),
  ];
});
parity('InstallationKeysRepository', 'replace', async (s) => {
  const k = repo(s, 'InstallationKeysRepository');
  return [
    await k.replace('parity-secret', 'first', 'rotated'),
    await k.replace('parity-secret', 'first', 'lost'),
    await k.replace('nothing', 'x', 'y'),
  ];
});
parity('InstallationKeysRepository', 'all', async (s) =>
  by((await repo(s, 'InstallationKeysRepository').all()) as { name: string }[], (k) => k.name),
);

// ---- sandboxes

const LIMITS = { cpuSeconds: 30, memoryMb: 512, pids: 64 };
parity('SandboxesRepository', 'create', async (s) => {
  const b = repo(s, 'SandboxesRepository');
  const answers = await steps(
    () =>
      tx(s, (x) => b.create(s.w.ws, { name: 'box', network: 'none', limits: LIMITS, createdBy: 'token:parity' }, x)),
    () =>
      tx(s, (x) =>
        b.create(s.w.ws, { name: 'egress-box', network: 'egress', limits: {}, createdBy: 'user:parity' }, x),
      ),
    () => tx(s, (x) => b.create(s.w.ws, { name: 'box', network: 'none', limits: {}, createdBy: 'token:parity' }, x)),
  );
  [s.w.box, s.w.box2] = (answers as { id: string }[]).map((b) => b.id);
  return answers;
});
parity('SandboxesRepository', 'countLocked', async (s) => [
  await tx(s, (x) => repo(s, 'SandboxesRepository').countLocked(s.w.ws, x)),
  await tx(s, (x) => repo(s, 'SandboxesRepository').countLocked(s.w.ws2, x)),
]);
parity('SandboxesRepository', 'byName', async (s) => [
  await repo(s, 'SandboxesRepository').byName(s.w.ws, 'egress-box'),
  await repo(s, 'SandboxesRepository').byName(s.w.ws2, 'box'),
]);
parity('SandboxesRepository', 'list', (s) => repo(s, 'SandboxesRepository').list(s.w.ws, PAGE));
parity('SandboxesRepository', 'any', async (s) => [
  await repo(s, 'SandboxesRepository').any(s.w.ws),
  await repo(s, 'SandboxesRepository').any(s.w.ws2),
]);
parity('SandboxesRepository', 'setSource', async (s) => {
  await repo(s, 'SandboxesRepository').setSource(s.w.ws, s.w.box, 'tar.gz');
  await repo(s, 'SandboxesRepository').setSource(s.w.ws2, s.w.box2, 'git-bundle');
  return repo(s, 'SandboxesRepository').list(s.w.ws, PAGE);
});
parity('SandboxesRepository', 'touch', async (s) => {
  await repo(s, 'SandboxesRepository').touch(s.w.ws, s.w.box, at(300));
  return repo(s, 'SandboxesRepository').byName(s.w.ws, 'box');
});
const SNAPSHOT = {
  sha: 'a'.repeat(40),
  trigger: 'write',
  message: 'write: notes.md',
  files: [{ path: 'notes.md', status: 'A' }],
  agentSessionId: null,
  author: 'agent <agent@aileron.invalid>',
  createdAt: at(400),
};
parity('SandboxesRepository', 'addSnapshot', async (s) => {
  const b = repo(s, 'SandboxesRepository');
  return steps(
    () => tx(s, (x) => b.addSnapshot(s.w.ws, s.w.box, SNAPSHOT, x)),
    () =>
      tx(s, (x) =>
        b.addSnapshot(
          s.w.ws,
          s.w.box,
          {
            ...SNAPSHOT,
            sha: 'b'.repeat(40),
            trigger: 'bash',
            message: 'bash: rm notes.md',
            files: [{ path: 'notes.md', status: 'D' }],
            createdAt: at(500),
          },
          x,
        ),
      ),
    () => tx(s, (x) => b.addSnapshot(s.w.ws, s.w.box, SNAPSHOT, x)),
  );
});
parity('SandboxesRepository', 'snapshots', async (s) => [
  await repo(s, 'SandboxesRepository').snapshots(s.w.ws, s.w.box, PAGE),
  await repo(s, 'SandboxesRepository').snapshots(s.w.ws, s.w.box, { take: 1 }),
]);
parity('SandboxesRepository', 'snapshot', async (s) => [
  await repo(s, 'SandboxesRepository').snapshot(s.w.ws, s.w.box, 'a'.repeat(40)),
  await repo(s, 'SandboxesRepository').snapshot(s.w.ws, s.w.box2, 'a'.repeat(40)),
]);
parity('SandboxesRepository', 'shellRules', (s) => repo(s, 'SandboxesRepository').shellRules(s.w.ws));
parity('SandboxesRepository', 'putShellRules', async (s) => {
  const b = repo(s, 'SandboxesRepository');
  const rules = [{ id: 'no-curl', effect: 'deny', commands: ['curl *'] }];
  return [
    await tx(s, (x) => b.putShellRules(s.w.ws, { rules, elicitation: false, updatedBy: 'token:parity' }, x)),
    await tx(s, (x) =>
      b.putShellRules(
        s.w.ws,
        {
          rules: [...rules, { id: 'ask', effect: 'ask', commands: ['rm *'] }],
          elicitation: true,
          updatedBy: 'user:parity',
        },
        x,
      ),
    ),
    await b.shellRules(s.w.ws),
  ];
});
parity('SandboxesRepository', 'remove', async (s) => {
  const b = repo(s, 'SandboxesRepository');
  return [
    await tx(s, (x) => b.remove(s.w.ws2, s.w.box2, x)),
    await tx(s, (x) => b.remove(s.w.ws, s.w.box2, x)),
    await tx(s, (x) => b.remove(s.w.ws, s.w.box2, x)),
    await b.list(s.w.ws, PAGE),
  ];
});

// ---- policy

const POLICY = {
  default: 'deny',
  rules: [
    { id: 'reads', effect: 'allow', tools: ['get_*'] },
    { id: 'merges', effect: 'approval', tools: ['merge_*'] },
  ],
};
parity('PolicyRepository', 'create', async (s) => {
  const p = repo(s, 'PolicyRepository');
  return steps(
    () =>
      tx(s, (x) =>
        p.create(
          s.w.ws,
          { version: 1, document: POLICY, digest: hash('p1'), restoredFrom: null, createdBy: 'token:parity' },
          x,
        ),
      ),
    () =>
      tx(s, (x) =>
        p.create(
          s.w.ws,
          {
            version: 2,
            document: { ...POLICY, rules: [] },
            digest: hash('p2'),
            restoredFrom: null,
            createdBy: 'token:parity',
          },
          x,
        ),
      ),
    () =>
      tx(s, (x) =>
        p.create(
          s.w.ws,
          { version: 3, document: POLICY, digest: hash('p1'), restoredFrom: 1, createdBy: 'user:parity' },
          x,
        ),
      ),
    () =>
      tx(s, (x) =>
        p.create(
          s.w.ws,
          { version: 2, document: POLICY, digest: hash('p9'), restoredFrom: null, createdBy: 'token:parity' },
          x,
        ),
      ),
  );
});
parity('PolicyRepository', 'latest', async (s) => [
  await tx(s, (x) => repo(s, 'PolicyRepository').latest(s.w.ws, x)),
  await repo(s, 'PolicyRepository').latest(s.w.ws2),
]);
parity('PolicyRepository', 'get', async (s) => [
  await repo(s, 'PolicyRepository').get(s.w.ws, 2),
  await repo(s, 'PolicyRepository').get(s.w.ws, 7),
]);
parity('PolicyRepository', 'list', async (s) => [
  await repo(s, 'PolicyRepository').list(s.w.ws, PAGE),
  await repo(s, 'PolicyRepository').list(s.w.ws, { after: 3, take: 1 }),
]);

// ---- audit chains and sinks

const CHAIN = uuid(1);
function record(s: Side, seq: number, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    chainId: CHAIN,
    organizationId: s.w.orgId,
    workspaceId: s.w.ws.workspaceId,
    seq,
    id: uuid(100 + seq),
    type: seq % 2 ? 'execution.succeeded' : 'secret.written',
    recordedAt: at(1000 + seq * 60),
    occurredAt: at(900 + seq * 60),
    source: seq % 2 ? 'gateway' : 'api',
    actor: seq % 2 ? 'gateway:laptop' : 'token:parity',
    principal: seq % 2 ? 'user:ada@example.com' : null,
    executionMode: seq % 2 ? 'local' : null,
    server: seq % 2 ? 'github' : null,
    // a lone surrogate in a text column is stored as U+FFFD on both
    tool: seq % 2 ? (seq === 3 ? 'get_\ud800issue' : 'get_issue') : null,
    decision: seq % 2 ? 'allow' : null,
    sessionId: seq % 2 ? 'sess-1' : null,
    data: { seq, note: 'é ✓' },
    prevHash: hash(`h${seq - 1}`),
    hash: hash(`h${seq}`),
    ...overrides,
  };
}
parity('AuditRepository', 'lockHead', async (s) => {
  const a = repo(s, 'AuditRepository');
  return [
    await tx(s, (x) => a.lockHead(x, s.w.org, CHAIN, s.w.ws.workspaceId)),
    await steps(() => tx(s, (x) => a.lockHead(x, s.w.orgB, CHAIN, null))),
  ];
});
parity('AuditRepository', 'append', async (s) => {
  const a = repo(s, 'AuditRepository');
  const appended = await tx(s, async (x) => {
    await a.lockHead(x, s.w.org, CHAIN, s.w.ws.workspaceId);
    return [await a.append(x, s.w.org, [record(s, 1), record(s, 2), record(s, 3)]), await a.append(x, s.w.org, [])];
  });
  // a repeat fails the statement, or with skipRepeats leaves the head where it was
  const repeated = await steps(() => tx(s, (x) => a.append(x, s.w.org, [record(s, 4, { id: uuid(101) })])));
  const skipped = await tx(s, (x) => a.append(x, s.w.org, [record(s, 4, { id: uuid(101) })], { skipRepeats: true }));
  const more = await tx(s, async (x) => {
    await a.lockHead(x, s.w.org, CHAIN, s.w.ws.workspaceId);
    return a.append(x, s.w.org, [record(s, 4), record(s, 5)], { skipRepeats: true });
  });
  return [appended, repeated, skipped, more, await a.head(s.w.org, CHAIN)];
});
parity('AuditRepository', 'announcedAfter', async (s) => {
  const a = repo(s, 'AuditRepository');
  // a chain of its own: records 2 and 3 announced by events 41 and 40 (ids need not follow the chain's order), 1 by none
  const chain = uuid(2);
  await tx(s, async (x) => {
    await a.lockHead(x, s.w.org, chain, s.w.ws.workspaceId);
    await a.append(
      x,
      s.w.org,
      [1, 2, 3].map((seq) => record(s, seq, { chainId: chain })),
      {
        eventIds: [null, '41', '40'],
      },
    );
  });
  return [
    await a.announcedAfter(s.w.org, chain, 0n, 10),
    await a.announcedAfter(s.w.org, chain, 40n, 10),
    await a.announcedAfter(s.w.org, chain, 0n, 1),
    // another organisation's scope sees none of them
    await a.announcedAfter(s.w.orgB, chain, 0n, 10),
  ];
});
parity('AuditRepository', 'existingIds', async (s) =>
  tx(s, async (x) => [
    await repo(s, 'AuditRepository').existingIds(x, s.w.org, CHAIN, [uuid(101), uuid(999), uuid(103)]),
    await repo(s, 'AuditRepository').existingIds(x, s.w.org, CHAIN, []),
  ]),
);
parity('AuditRepository', 'recordsById', async (s) => {
  const a = repo(s, 'AuditRepository');
  const ref = (id: string, organizationId = s.w.orgId as string) => ({ organizationId, chainId: CHAIN, id });
  return [
    // in the order asked or not (a map by id is what callers make), missing ones left out
    (await a.recordsById(SYSTEM, [ref(uuid(103)), ref(uuid(999)), ref(uuid(101))])).sort(
      (x: { seq: number }, y: { seq: number }) => x.seq - y.seq,
    ),
    // through a transaction; a record asked for under another organisation is not found
    await tx(s, (x) => a.recordsById(SYSTEM, [ref(uuid(102)), ref(uuid(101), uuid(996))], x)),
    await a.recordsById(SYSTEM, []),
  ];
});
parity('AuditRepository', 'writeCheckpoint', async (s) => {
  const a = repo(s, 'AuditRepository');
  const checkpoint = { seq: 2, hash: hash('h2'), kind: 'periodic', keyId: 'key-2', signature: 'signed-2' };
  await tx(s, (x) => a.writeCheckpoint(x, s.w.org, CHAIN, checkpoint));
  // the same seq again: kept as it was, unless retention makes it its anchor
  await tx(s, (x) => a.writeCheckpoint(x, s.w.org, CHAIN, { ...checkpoint, signature: 'ignored' }));
  await tx(s, (x) =>
    a.writeCheckpoint(x, s.w.org, CHAIN, { ...checkpoint, seq: 4, hash: hash('h4'), signature: 'signed-4' }),
  );
  return [await a.checkpoints(s.w.org, CHAIN), await a.head(s.w.org, CHAIN)];
});
parity('AuditRepository', 'head', async (s) => [
  await repo(s, 'AuditRepository').head(s.w.org, CHAIN),
  await repo(s, 'AuditRepository').head(s.w.orgB, CHAIN),
]);
parity('AuditRepository', 'chainsNeedingCheckpoint', async (s) => {
  const a = repo(s, 'AuditRepository');
  return [
    await a.chainsNeedingCheckpoint(SYSTEM, 1, 86_400, 10),
    await a.chainsNeedingCheckpoint(SYSTEM, 5, 86_400, 10),
    await a.chainsNeedingCheckpoint(SYSTEM, 100, 0, 10),
  ];
});
parity('AuditRepository', 'heads', async (s) => [
  await repo(s, 'AuditRepository').heads(s.w.org),
  await repo(s, 'AuditRepository').heads(s.w.orgB),
]);
parity('AuditRepository', 'checkpoints', async (s) => [
  await repo(s, 'AuditRepository').checkpoints(s.w.org, CHAIN),
  await repo(s, 'AuditRepository').checkpoints(s.w.orgB, CHAIN),
]);
parity('AuditRepository', 'pageBySeq', async (s) => {
  const a = repo(s, 'AuditRepository');
  return [
    await a.pageBySeq(s.w.org, CHAIN, 0, 2),
    await a.pageBySeq(s.w.org, CHAIN, 2, 10, 4),
    await a.pageBySeq(s.w.orgB, CHAIN, 0, 10),
  ];
});
parity('AuditRepository', 'newestSeq', async (s) => [
  await repo(s, 'AuditRepository').newestSeq(s.w.org, CHAIN),
  await repo(s, 'AuditRepository').newestSeq(s.w.org, uuid(2)),
]);
parity('AuditRepository', 'search', async (s) => {
  const a = repo(s, 'AuditRepository');
  const seqs = async (filters: Record<string, unknown>, page: Record<string, unknown> = {}) =>
    ((await a.search(s.w.org, CHAIN, filters, { limit: 10, order: 'desc', ...page })) as { seq: number }[]).map(
      (r) => r.seq,
    );
  return [
    await a.search(s.w.org, CHAIN, {}, { limit: 2, order: 'desc' }),
    await seqs({ types: ['secret.written'] }),
    await seqs({
      tool: 'get_issue',
      server: 'github',
      decision: 'allow',
      session: 'sess-1',
      principal: 'user:ada@example.com',
      execution_mode: 'local',
      actor: 'gateway:laptop',
    }),
    await seqs({ from: at(900 + 2 * 60), to: at(900 + 4 * 60) }),
    await seqs({}, { beforeSeq: 4, order: 'desc' }),
    await seqs({}, { afterSeq: 2, order: 'asc' }),
    await seqs({ types: ['nothing'] }),
  ];
});
parity('AuditRepository', 'callCounts', async (s) => {
  const a = repo(s, 'AuditRepository');
  // the odd records are a gateway's allowed calls, 2 minutes apart; the others are no calls
  return [
    await a.callCounts(s.w.org, CHAIN, { from: at(0), to: at(86_400), bucketSeconds: 60 }),
    await a.callCounts(s.w.org, CHAIN, { from: at(0), to: at(86_400), bucketSeconds: 3600 }),
    await a.callCounts(s.w.org, CHAIN, { from: at(900 + 2 * 60), to: at(900 + 5 * 60), bucketSeconds: 60 }),
    await a.callCounts(s.w.orgB, CHAIN, { from: at(0), to: at(86_400), bucketSeconds: 60 }),
  ];
});
parity('AuditRepository', 'calls', async (s) => {
  const a = repo(s, 'AuditRepository');
  const range = { from: at(0), to: at(86_400), limit: 10 };
  return [
    await a.calls(s.w.org, CHAIN, range),
    await a.calls(s.w.org, CHAIN, { ...range, limit: 1 }),
    await a.calls(s.w.org, CHAIN, { ...range, after: { occurredAt: at(900 + 3 * 60), seq: 3 } }),
    await a.calls(s.w.orgB, CHAIN, range),
  ];
});
parity('AuditRepository', 'afterCursor', async (s) => [
  await repo(s, 'AuditRepository').afterCursor(s.w.org, CHAIN, 3, 10),
  await repo(s, 'AuditRepository').afterCursor(s.w.org, CHAIN, 5, 10),
]);
parity('AuditRepository', 'retentionEdge', async (s) => {
  const a = repo(s, 'AuditRepository');
  return [await a.retentionEdge(s.w.org, CHAIN, at(1000 + 2 * 60 + 1)), await a.retentionEdge(s.w.org, CHAIN, PAST)];
});
parity('AuditRepository', 'removeThrough', async (s) => {
  const a = repo(s, 'AuditRepository');
  return [await tx(s, (x) => a.removeThrough(x, s.w.org, CHAIN, 2)), await a.pageBySeq(s.w.org, CHAIN, 0, 10)];
});
parity('AuditRepository', 'setRetentionDays', async (s) => {
  await tx(s, (x) => repo(s, 'AuditRepository').setRetentionDays(s.w.org, 30, x));
  await tx(s, (x) => repo(s, 'AuditRepository').setRetentionDays(s.w.orgB, null, x));
  return repo(s, 'AuditRepository').retentionDays(s.w.org);
});
parity('AuditRepository', 'retentionDays', async (s) => [
  await repo(s, 'AuditRepository').retentionDays(s.w.org),
  await repo(s, 'AuditRepository').retentionDays(s.w.orgB),
]);
parity('AuditRepository', 'organizationsWithRetention', (s) =>
  repo(s, 'AuditRepository').organizationsWithRetention(SYSTEM),
);
const SINK = uuid(200);
parity('AuditSinksRepository', 'create', async (s) =>
  steps(
    () =>
      tx(s, (x) =>
        repo(s, 'AuditSinksRepository').create(
          s.w.org,
          { id: SINK, name: 'siem', url: 'https://siem.example/ingest', secret: 'sealed', createdBy: 'token:parity' },
          x,
        ),
      ),
    () =>
      tx(s, (x) =>
        repo(s, 'AuditSinksRepository').create(
          s.w.org,
          { id: SINK, name: 'again', url: 'https://siem.example/other', secret: 'sealed', createdBy: 'token:parity' },
          x,
        ),
      ),
  ),
);
parity('AuditSinksRepository', 'list', async (s) => [
  await repo(s, 'AuditSinksRepository').list(s.w.org, PAGE),
  await repo(s, 'AuditSinksRepository').list(s.w.orgB, PAGE),
]);
parity('AuditSinksRepository', 'get', async (s) => [
  await repo(s, 'AuditSinksRepository').get(s.w.org, SINK),
  await repo(s, 'AuditSinksRepository').get(s.w.orgB, SINK),
]);
parity('AuditSinksRepository', 'enabledIds', async (s) => [
  await repo(s, 'AuditSinksRepository').enabledIds(s.w.org),
  await repo(s, 'AuditSinksRepository').enabledIds(s.w.orgB),
]);
parity('AuditSinksRepository', 'allEnabled', (s) => repo(s, 'AuditSinksRepository').allEnabled(SYSTEM));
parity('AuditSinksRepository', 'setEnabled', async (s) => {
  const k = repo(s, 'AuditSinksRepository');
  return [
    await tx(s, (x) => k.setEnabled(s.w.orgB, SINK, false, x)),
    await tx(s, (x) => k.setEnabled(s.w.org, SINK, false, x)),
    await tx(s, (x) => k.setEnabled(s.w.org, SINK, false, x)),
    await k.enabledIds(s.w.org),
    await tx(s, (x) => k.setEnabled(s.w.org, SINK, true, x)),
    await k.enabledIds(s.w.org),
  ];
});
parity('AuditSinksRepository', 'claim', async (s) => {
  const k = repo(s, 'AuditSinksRepository');
  return [
    await k.claim(s.w.org, SINK, 60_000),
    await k.claim(s.w.org, SINK, 60_000),
    await k.claim(s.w.orgB, SINK, 60_000),
  ];
});
parity('AuditSinksRepository', 'release', async (s) => {
  const k = repo(s, 'AuditSinksRepository');
  await k.release(s.w.org, SINK, { delivered: false, error: 'HTTP 503' });
  const failed = await k.get(s.w.org, SINK);
  const claimed = await k.claim(s.w.org, SINK, 60_000);
  await k.release(s.w.org, SINK, { delivered: true });
  return [failed, claimed, await k.get(s.w.org, SINK)];
});
parity('AuditSinksRepository', 'advance', async (s) => {
  const k = repo(s, 'AuditSinksRepository');
  await k.advance(s.w.org, SINK, CHAIN, 3);
  await k.advance(s.w.org, SINK, CHAIN, 5);
  await k.advance(s.w.org, SINK, uuid(2), 1);
  await k.advance(s.w.orgB, SINK, uuid(3), 9);
  return k.cursors(s.w.org, SINK);
});
parity('AuditSinksRepository', 'cursors', async (s) => [
  await repo(s, 'AuditSinksRepository').cursors(s.w.org, SINK),
  await repo(s, 'AuditSinksRepository').cursors(s.w.orgB, SINK),
]);
parity('AuditSinksRepository', 'delete', async (s) => {
  const k = repo(s, 'AuditSinksRepository');
  return [
    await tx(s, (x) => k.delete(s.w.orgB, SINK, x)),
    await tx(s, (x) => k.delete(s.w.org, SINK, x)),
    await tx(s, (x) => k.delete(s.w.org, SINK, x)),
    await k.cursors(s.w.org, SINK),
  ];
});

// ---- the vault

const SECRET = 'db/password';
const sealed = (n: number) => ({ ciphertext: `cipher-${n}`, wrappedDataKey: `wrapped-${n}` });
parity('VaultRepository', 'addKey', async (s) => {
  const v = repo(s, 'VaultRepository');
  return steps(
    () => tx(s, (x) => v.addKey(s.w.ws, 1, 'workspace-key-1', x)),
    () => tx(s, (x) => v.addKey(s.w.ws, 2, 'workspace-key-2', x)),
    () => tx(s, (x) => v.addKey(s.w.ws, 1, 'again', x)),
  );
});
parity('VaultRepository', 'keys', async (s) => [
  await repo(s, 'VaultRepository').keys(s.w.ws),
  await tx(s, (x) => repo(s, 'VaultRepository').keys(s.w.ws, x, true)),
  await repo(s, 'VaultRepository').keys(s.w.ws2),
]);
parity('VaultRepository', 'retireKeysBefore', async (s) => {
  await tx(s, (x) => repo(s, 'VaultRepository').retireKeysBefore(s.w.ws, 2, x));
  return ((await repo(s, 'VaultRepository').keys(s.w.ws)) as { version: number; retiredAt: Date | null }[]).map((k) => [
    k.version,
    k.retiredAt === null,
  ]);
});
parity('VaultRepository', 'replaceWrappedKey', async (s) => {
  await tx(s, (x) => repo(s, 'VaultRepository').replaceWrappedKey(s.w.ws, 2, 'workspace-key-2b', x));
  return repo(s, 'VaultRepository').keys(s.w.ws);
});
parity('VaultRepository', 'writeVersion', async (s) => {
  const v = repo(s, 'VaultRepository');
  const write = (path: string, version: number, keyVersion = 2) =>
    tx(s, (x) =>
      v.writeVersion(
        s.w.ws,
        {
          path,
          version,
          sealed: sealed(version),
          keyVersion,
          actor: 'token:parity',
          deliverToGateways: path === 'github/token',
        },
        x,
      ),
    );
  return steps(
    () => write(SECRET, 1, 1),
    () => write(SECRET, 2),
    () => write(SECRET, 3),
    () => write('db/user', 1),
    () => write('github/token', 1),
    () => write(SECRET, 3),
  );
});
parity('VaultRepository', 'setDelivery', async (s) => {
  const v = repo(s, 'VaultRepository');
  const answers = [
    await tx(s, (x) => v.setDelivery(s.w.ws, 'db/user', true, x)),
    await tx(s, (x) => v.setDelivery(s.w.ws2, 'db/user', false, x)),
    await tx(s, (x) => v.setDelivery(s.w.ws, 'no/such', true, x)),
    ((await v.metadata(s.w.ws, 'db/user')) as { deliverToGateways: boolean }).deliverToGateways,
  ];
  await tx(s, (x) => v.setDelivery(s.w.ws, 'db/user', false, x));
  return [...answers, ((await v.metadata(s.w.ws, 'db/user')) as { deliverToGateways: boolean }).deliverToGateways];
});
parity('VaultRepository', 'latestVersions', async (s) => {
  const v = repo(s, 'VaultRepository');
  return [
    await v.latestVersions(s.w.ws, [SECRET, 'github/token', 'no/such']),
    await v.latestVersions(s.w.ws2, [SECRET]),
    await v.latestVersions(s.w.ws, []),
  ];
});
parity('VaultRepository', 'metadata', async (s) => [
  await tx(s, (x) => repo(s, 'VaultRepository').metadata(s.w.ws, SECRET, x)),
  await repo(s, 'VaultRepository').metadata(s.w.ws2, SECRET),
]);
parity('VaultRepository', 'list', async (s) => {
  const v = repo(s, 'VaultRepository');
  return [
    await v.list(s.w.ws, {}, PAGE),
    await v.list(s.w.ws, { prefix: 'db/' }, PAGE),
    await v.list(s.w.ws, {}, { after: 'db/password', take: 1 }),
    await v.list(s.w.ws, { prefix: 'db/' }, { after: 'db/password', take: 10 }),
  ];
});
parity('VaultRepository', 'version', async (s) => {
  const v = repo(s, 'VaultRepository');
  return [
    await v.version(s.w.ws, SECRET, null),
    await tx(s, (x) => v.version(s.w.ws, SECRET, null, x)),
    await v.version(s.w.ws, SECRET, 1),
    await v.version(s.w.ws, SECRET, 9),
    await v.version(s.w.ws2, SECRET, null),
  ];
});
parity('VaultRepository', 'versionsNotUnder', async (s) =>
  by(
    (await tx(s, (x) => repo(s, 'VaultRepository').versionsNotUnder(s.w.ws, 2, x))) as {
      path: string;
      version: number;
    }[],
    (r) => `${r.path}#${r.version}`,
  ),
);
parity('VaultRepository', 'rewrap', async (s) => {
  await tx(s, (x) => repo(s, 'VaultRepository').rewrap(s.w.ws, SECRET, 1, 'rewrapped-1', 2, x));
  return [
    await repo(s, 'VaultRepository').version(s.w.ws, SECRET, 1),
    await tx(s, (x) => repo(s, 'VaultRepository').versionsNotUnder(s.w.ws, 2, x)),
  ];
});
parity('VaultRepository', 'pruneVersions', async (s) => {
  const v = repo(s, 'VaultRepository');
  return [
    await tx(s, (x) => v.pruneVersions(s.w.ws, SECRET, 2, x)),
    await tx(s, (x) => v.pruneVersions(s.w.ws, SECRET, 2, x)),
    await v.metadata(s.w.ws, SECRET),
  ];
});
parity('VaultRepository', 'markRead', async (s) => {
  await tx(s, (x) => repo(s, 'VaultRepository').markRead(s.w.ws, SECRET, 'pool:parity', x));
  const read = (await repo(s, 'VaultRepository').metadata(s.w.ws, SECRET)) as { lastReadBy: string; lastReadAt: Date };
  return [read.lastReadBy, read.lastReadAt];
});
parity('VaultRepository', 'delete', async (s) => {
  const v = repo(s, 'VaultRepository');
  return [
    await tx(s, (x) => v.delete(s.w.ws, 'db/user', x)),
    await tx(s, (x) => v.delete(s.w.ws, 'db/user', x)),
    await v.version(s.w.ws, 'db/user', null),
    await v.list(s.w.ws, {}, PAGE),
  ];
});
const kept = (id: string, generation: number, keyVersion = 2) => ({
  id,
  generation,
  ciphertext: `kept-${id}-${generation}`,
  wrappedDataKey: `kept-key-${generation}`,
  keyVersion,
});
parity('VaultRepository', 'writeSealed', async (s) => {
  const v = repo(s, 'VaultRepository');
  await tx(s, (x) => v.writeSealed(s.w.ws, kept('connection:a', 1, 1), x));
  await tx(s, (x) => v.writeSealed(s.w.ws, kept('connection:a', 2, 1), x));
  await tx(s, (x) => v.writeSealed(s.w.ws, kept('connection-start:b', 1), x));
  await tx(s, (x) => v.writeSealed(s.w.ws2, kept('connection:a', 1), x));
  return [await v.sealed(s.w.ws, 'connection:a'), await v.sealed(s.w.ws2, 'connection:a')];
});
parity('VaultRepository', 'sealed', async (s) => [
  await repo(s, 'VaultRepository').sealed(s.w.ws, 'connection-start:b'),
  await tx(s, (x) => repo(s, 'VaultRepository').sealed(s.w.ws, 'connection:a', x)),
  await repo(s, 'VaultRepository').sealed(s.w.ws, 'nobody'),
]);
parity('VaultRepository', 'sealedNotUnder', async (s) =>
  tx(s, (x) => repo(s, 'VaultRepository').sealedNotUnder(s.w.ws, 2, x)),
);
parity('VaultRepository', 'rewrapSealed', async (s) => {
  const v = repo(s, 'VaultRepository');
  await tx(s, (x) => v.rewrapSealed(s.w.ws, 'connection:a', 'kept-rewrapped', 2, x));
  return [await v.sealed(s.w.ws, 'connection:a'), await tx(s, (x) => v.sealedNotUnder(s.w.ws, 2, x))];
});
parity('VaultRepository', 'deleteSealed', async (s) => {
  const v = repo(s, 'VaultRepository');
  return [
    await tx(s, (x) => v.deleteSealed(s.w.ws, { prefix: 'connection-start:' }, x)),
    await tx(s, (x) => v.deleteSealed(s.w.ws, { in: ['connection:a', 'nobody'] }, x)),
    await tx(s, (x) => v.deleteSealed(s.w.ws, { in: [] }, x)),
    await v.sealed(s.w.ws, 'connection:a'),
    await v.sealed(s.w.ws2, 'connection:a'),
  ];
});
parity('VaultRepository', 'allKeys', async (s) =>
  by((await repo(s, 'VaultRepository').allKeys(SYSTEM)) as { version: number }[], (k) => String(k.version)),
);
parity('VaultRepository', 'replaceWrappedKeySystem', async (s) => {
  await repo(s, 'VaultRepository').replaceWrappedKeySystem(
    SYSTEM,
    { organizationId: s.w.orgId, workspaceId: s.w.ws.workspaceId, version: 1 },
    'root-rotated-1',
  );
  await repo(s, 'VaultRepository').replaceWrappedKeySystem(
    SYSTEM,
    { organizationId: s.w.orgB.organizationId, workspaceId: s.w.ws.workspaceId, version: 2 },
    'wrong tenant',
  );
  return repo(s, 'VaultRepository').keys(s.w.ws);
});

// ---- approvals

function approval(s: Side, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    requester: 'user:ada@example.com',
    requestedBy: `gateway:${s.w.gateway}`,
    gatewayId: s.w.gateway,
    sessionId: 'sess-1',
    agentSessionId: null,
    server: 'github',
    tool: 'merge_pr',
    arguments: { repo: 'acme/app', n: 7 },
    argumentsDigest: hash('args-7'),
    executionMode: 'local',
    policyVersion: 3,
    rules: ['merges'],
    route: 'workspace-admins',
    quorum: 1,
    expiresAt: FUTURE,
    ...overrides,
  };
}
const CALL = (s: Side) => ({
  server: 'github',
  tool: 'merge_pr',
  argumentsDigest: hash('args-7'),
  requester: 'user:ada@example.com',
  sessionId: 'sess-1',
  gatewayId: s.w.gateway,
});
parity('ApprovalsRepository', 'create', async (s) => {
  const a = repo(s, 'ApprovalsRepository');
  const answers = await steps(
    () => tx(s, (x) => a.create(s.w.ws, approval(s), x)),
    () =>
      tx(s, (x) =>
        a.create(
          s.w.ws,
          approval(s, {
            expiresAt: PAST,
            argumentsDigest: hash('args-8'),
            arguments: { n: 8 },
            gatewayId: null,
            sessionId: null,
          }),
          x,
        ),
      ),
    () => tx(s, (x) => a.create(s.w.ws, approval(s, { gatewayId: uuid(995) }), x)),
  );
  [s.w.approval, s.w.expired] = (answers as { id: string }[]).map((r) => r.id);
  return answers;
});
parity('ApprovalsRepository', 'get', async (s) => [
  await tx(s, (x) => repo(s, 'ApprovalsRepository').get(s.w.org, s.w.approval, x)),
  await repo(s, 'ApprovalsRepository').get(s.w.orgB, s.w.approval),
]);
parity('ApprovalsRepository', 'lock', (s) =>
  tx(s, async (x) => [
    await repo(s, 'ApprovalsRepository').lock(x, s.w.org, s.w.approval),
    await repo(s, 'ApprovalsRepository').lock(x, s.w.orgB, s.w.approval),
  ]),
);
parity('ApprovalsRepository', 'addDecision', async (s) => {
  const a = repo(s, 'ApprovalsRepository');
  await tx(s, (x) =>
    a.addDecision(x, s.w.org, s.w.approval, {
      approver: `user:${s.w.ada}`,
      decision: 'approve',
      reason: 'looks right',
      via: 'page',
    }),
  );
  return [
    await steps(() =>
      tx(s, (x) =>
        a.addDecision(x, s.w.org, uuid(994), { approver: 'user:x', decision: 'deny', reason: null, via: 'api' }),
      ),
    ),
    ((await a.get(s.w.org, s.w.approval)) as { decisions: unknown[] }).decisions,
  ];
});
parity('ApprovalsRepository', 'finish', async (s) => {
  const a = repo(s, 'ApprovalsRepository');
  await tx(s, (x) => a.finish(x, s.w.org, s.w.approval, 'approved', 'quorum reached'));
  // only a pending request finishes
  await tx(s, (x) => a.finish(x, s.w.org, s.w.approval, 'denied', 'too late'));
  return a.get(s.w.org, s.w.approval);
});
parity('ApprovalsRepository', 'findForCall', async (s) => [
  await repo(s, 'ApprovalsRepository').findForCall(s.w.ws, CALL(s)),
  await repo(s, 'ApprovalsRepository').findForCall(s.w.ws, { ...CALL(s), sessionId: null }),
]);
parity('ApprovalsRepository', 'consume', async (s) => {
  const a = repo(s, 'ApprovalsRepository');
  return [
    await tx(s, (x) => a.consume(x, s.w.ws, s.w.approval, { ...CALL(s), tool: 'merge_other' })),
    await tx(s, (x) => a.consume(x, s.w.ws, s.w.approval, CALL(s))),
    await tx(s, (x) => a.consume(x, s.w.ws, s.w.approval, CALL(s))),
    await a.findForCall(s.w.ws, CALL(s)),
  ];
});
parity('ApprovalsRepository', 'list', async (s) => {
  const a = repo(s, 'ApprovalsRepository');
  const ids = async (filter: Record<string, unknown>, page: object = PAGE) =>
    ((await a.list(s.w.ws, filter, page)) as { id: string }[]).map((r) => r.id);
  const all = (await a.list(s.w.ws, {}, PAGE)) as { createdAt: Date; id: string }[];
  return [
    all,
    await ids({ status: 'pending' }),
    await ids({ status: 'expired' }),
    await ids({ status: 'approved' }),
    await ids({}, { after: { createdAt: all[0]!.createdAt, id: all[0]!.id }, take: 10 }),
    await ids({}, { take: 1 }),
  ];
});
parity('ApprovalsRepository', 'countPending', async (s) => [
  await repo(s, 'ApprovalsRepository').countPending(s.w.ws),
  await repo(s, 'ApprovalsRepository').countPending(s.w.ws2),
]);
parity('ApprovalsRepository', 'lockExpired', (s) =>
  tx(s, (x) => repo(s, 'ApprovalsRepository').lockExpired(x, SYSTEM, 10)),
);
parity('ApprovalsRepository', 'nextExpiry', (s) => repo(s, 'ApprovalsRepository').nextExpiry(SYSTEM));
const ROUTING = {
  default_route: 'leads',
  routes: { leads: { approvers: [{ user: 'ada@example.com' }], quorum: 1, expires_in_seconds: 600 } },
  groups: {},
  rotations: {},
};
parity('ApprovalsRepository', 'putRouting', async (s) => {
  const a = repo(s, 'ApprovalsRepository');
  return [
    await tx(s, (x) => a.putRouting(s.w.ws, ROUTING, 'token:parity', x)),
    await tx(s, (x) => a.putRouting(s.w.ws, { ...ROUTING, default_route: undefined }, 'user:parity', x)),
  ];
});
parity('ApprovalsRepository', 'routing', async (s) => [
  await repo(s, 'ApprovalsRepository').routing(s.w.ws),
  await repo(s, 'ApprovalsRepository').routing(s.w.ws2),
]);
parity('ApprovalsRepository', 'users', async (s) =>
  by(
    (await repo(s, 'ApprovalsRepository').users(s.w.org, [
      s.w.carol,
      'BOB@example.com',
      'nobody@example.com',
      'not-an-id',
    ])) as { email: string }[],
    (u) => u.email,
  ),
);
parity('ApprovalsRepository', 'personOf', async (s) => {
  const a = repo(s, 'ApprovalsRepository');
  return [
    await a.personOf(s.w.org, `token:${s.w.token2}`),
    await a.personOf(s.w.org, `token:${s.w.token1}`),
    await a.personOf(s.w.org, `user:${s.w.bob}`),
    await a.personOf(s.w.orgB, `token:${s.w.token2}`),
    await a.personOf(s.w.org, 'gateway:x'),
  ];
});
parity('ApprovalsRepository', 'user', async (s) => [
  await repo(s, 'ApprovalsRepository').user(s.w.org, s.w.dana),
  await repo(s, 'ApprovalsRepository').user(s.w.orgB, s.w.dana),
]);
parity('ApprovalsRepository', 'organizationOf', async (s) => [
  await repo(s, 'ApprovalsRepository').organizationOf(SYSTEM, s.w.approval),
  await repo(s, 'ApprovalsRepository').organizationOf(SYSTEM, uuid(993)),
]);
parity('ApprovalsRepository', 'workspace', async (s) => [
  await repo(s, 'ApprovalsRepository').workspace(s.w.org, s.w.ws2.workspaceId),
  await repo(s, 'ApprovalsRepository').workspace(s.w.orgB, s.w.ws2.workspaceId),
]);
parity('ApprovalsRepository', 'workspaceRoles', async (s) => {
  const a = repo(s, 'ApprovalsRepository');
  return [
    await a.workspaceRoles(s.w.ws, s.w.ada),
    await tx(s, (x) => a.workspaceRoles(s.w.ws, s.w.bob, x)),
    await a.workspaceRoles(s.w.ws2, s.w.carol),
    await a.workspaceRoles(s.w.ws, uuid(992)),
  ];
});
parity('ApprovalsRepository', 'createLink', async (s) => {
  const a = repo(s, 'ApprovalsRepository');
  return steps(
    () =>
      tx(s, (x) =>
        a.createLink(x, s.w.org, {
          tokenHash: hash('link1'),
          approvalId: s.w.approval,
          userId: s.w.ada,
          expiresAt: FUTURE,
        }),
      ),
    () =>
      tx(s, (x) =>
        a.createLink(x, s.w.org, {
          tokenHash: hash('link2'),
          approvalId: s.w.approval,
          userId: s.w.ada,
          expiresAt: PAST,
        }),
      ),
    () =>
      tx(s, (x) =>
        a.createLink(x, s.w.org, {
          tokenHash: hash('link1'),
          approvalId: s.w.approval,
          userId: s.w.bob,
          expiresAt: FUTURE,
        }),
      ),
  );
});
parity('ApprovalsRepository', 'findLink', async (s) => [
  await repo(s, 'ApprovalsRepository').findLink(SYSTEM, hash('link1')),
  await repo(s, 'ApprovalsRepository').findLink(SYSTEM, hash('link9')),
]);
parity('ApprovalsRepository', 'useLink', async (s) => {
  const a = repo(s, 'ApprovalsRepository');
  const use = (link: string, scope = s.w.org) => tx(s, (x) => a.useLink(x, scope, hash(link)));
  return [
    await use('link1', s.w.orgB),
    await use('link1'),
    await use('link1'),
    await use('link2'),
    ((await a.findLink(SYSTEM, hash('link1'))) as { usedAt: Date }).usedAt,
  ];
});

// ---- agent sessions

const SESSION = uuid(300);
parity('AgentSessionsRepository', 'create', async (s) => {
  const r = repo(s, 'AgentSessionsRepository');
  const session = (id: string, overrides: Record<string, unknown> = {}) => ({
    id,
    name: 'fix the bug',
    agent: 'codex',
    caps: ['mcp:call', 'sandbox:use'],
    caveats: ['server = github'],
    creatorKind: 'token',
    creatorId: uuid(310),
    keyId: 'root-1',
    expiresAt: FUTURE,
    ...overrides,
  });
  return steps(
    () => tx(s, (x) => r.create(s.w.ws, session(SESSION), x)),
    () =>
      tx(s, (x) =>
        r.create(
          s.w.ws,
          session(uuid(301), {
            name: null,
            agent: null,
            caps: [],
            caveats: [],
            creatorKind: 'gateway',
            creatorId: uuid(311),
            expiresAt: PAST,
          }),
          x,
        ),
      ),
    () => tx(s, (x) => r.create(s.w.ws, session(SESSION), x)),
  );
});
parity('AgentSessionsRepository', 'get', async (s) => [
  await tx(s, (x) => repo(s, 'AgentSessionsRepository').get(s.w.org, SESSION, x)),
  await repo(s, 'AgentSessionsRepository').get(s.w.orgB, SESSION),
]);
parity('AgentSessionsRepository', 'list', async (s) => {
  const r = repo(s, 'AgentSessionsRepository');
  const ids = async (filter: Record<string, unknown>, page: object = PAGE) =>
    ((await r.list(s.w.ws, { live: false, ...filter }, page, THEN)) as { id: string }[]).map((x) => x.id);
  return [
    await r.list(s.w.ws, { live: true }, PAGE, THEN),
    await ids({}),
    await ids({ creator: `gateway:${uuid(311)}` }),
    await ids({}, { take: 1 }),
    await ids({ creator: `user:${uuid(310)}` }),
  ];
});
parity('AgentSessionsRepository', 'end', async (s) => {
  const r = repo(s, 'AgentSessionsRepository');
  return [
    await tx(s, (x) => r.end(x, s.w.org, SESSION, 'token:parity', at(600))),
    await tx(s, (x) => r.end(x, s.w.org, SESSION, 'token:again', at(700))),
    await r.get(s.w.org, SESSION),
  ];
});
parity('AgentSessionsRepository', 'markExpired', async (s) => {
  const r = repo(s, 'AgentSessionsRepository');
  return [
    // the session that expired in the past, once; then nothing is left to announce
    await tx(s, (x) => r.markExpired(x, SYSTEM, THEN, 10)),
    await tx(s, (x) => r.markExpired(x, SYSTEM, THEN, 10)),
    // an announced expiry ends it: ending it again says nothing
    await tx(s, (x) => r.end(x, s.w.org, uuid(301), 'token:late', at(800))),
    await r.get(s.w.org, uuid(301)),
  ];
});
parity('AgentSessionsRepository', 'nextExpiry', (s) => repo(s, 'AgentSessionsRepository').nextExpiry(SYSTEM));
parity('AgentSessionsRepository', 'addMessage', async (s) => {
  const r = repo(s, 'AgentSessionsRepository');
  const answers = await steps(
    () =>
      tx(s, (x) =>
        r.addMessage(x, s.w.org, {
          sessionId: SESSION,
          direction: 'agent',
          text: 'starting',
          level: 'info',
          author: 'codex',
        }),
      ),
    () =>
      tx(s, (x) =>
        r.addMessage(x, s.w.org, {
          sessionId: SESSION,
          direction: 'people',
          text: 'go ahead',
          level: 'info',
          author: 'user:ada',
        }),
      ),
    () =>
      tx(s, (x) =>
        r.addMessage(x, s.w.org, {
          sessionId: SESSION,
          direction: 'agent',
          text: 'done ✓',
          level: 'warn',
          author: 'codex',
        }),
      ),
    () =>
      tx(s, (x) =>
        r.addMessage(x, s.w.org, {
          sessionId: uuid(399),
          direction: 'agent',
          text: 'lost',
          level: 'info',
          author: 'codex',
        }),
      ),
  );
  s.w.messageIds = (answers.slice(0, 3) as { id: string }[]).map((m) => m.id);
  return answers;
});
parity('AgentSessionsRepository', 'messages', async (s) => {
  const r = repo(s, 'AgentSessionsRepository');
  const first = (await r.message(s.w.org, s.w.messageIds[0])) as { id: string; createdAt: Date };
  return [
    await r.messages(s.w.org, SESSION, null, null, 10),
    await r.messages(s.w.org, SESSION, 'agent', null, 10),
    await r.messages(s.w.org, SESSION, null, first, 1),
    await r.messages(s.w.orgB, SESSION, null, null, 10),
  ];
});
parity('AgentSessionsRepository', 'message', async (s) => [
  await repo(s, 'AgentSessionsRepository').message(s.w.org, s.w.messageIds[1]),
  await repo(s, 'AgentSessionsRepository').message(s.w.orgB, s.w.messageIds[1]),
]);
parity('AgentSessionsRepository', 'firstRootKey', async (s) => {
  const r = repo(s, 'AgentSessionsRepository');
  await r.firstRootKey(s.w.org, { keyId: 'root-1', sealed: 'sealed-1' });
  await r.firstRootKey(s.w.org, { keyId: 'root-x', sealed: 'sealed-x' });
  return r.rootKeys(s.w.org);
});
parity('AgentSessionsRepository', 'addRootKey', async (s) => {
  await repo(s, 'AgentSessionsRepository').addRootKey(s.w.org, { keyId: 'root-2', sealed: 'sealed-2' }, at(800));
  return repo(s, 'AgentSessionsRepository').rootKeys(s.w.org);
});
parity('AgentSessionsRepository', 'rootKeys', async (s) => [
  await repo(s, 'AgentSessionsRepository').rootKeys(s.w.org),
  await repo(s, 'AgentSessionsRepository').rootKeys(s.w.orgB),
]);
parity('AgentSessionsRepository', 'replaceSealed', async (s) => {
  const r = repo(s, 'AgentSessionsRepository');
  return [
    await r.replaceSealed(s.w.org, 'root-2', 'sealed-2', 'resealed-2'),
    await r.replaceSealed(s.w.org, 'root-2', 'sealed-2', 'lost'),
    await r.rootKeys(s.w.org),
  ];
});
parity('AgentSessionsRepository', 'removeRootKey', async (s) => {
  const r = repo(s, 'AgentSessionsRepository');
  // only a retired key goes
  return [
    await r.removeRootKey(s.w.org, 'root-2'),
    await r.removeRootKey(s.w.org, 'root-1'),
    await r.removeRootKey(s.w.org, 'root-1'),
    await r.rootKeys(s.w.org),
  ];
});

// ---- pinned tool definitions

const PINNED = { server: 'github', version: '1.0.0', tool: 'merge_pr' };
parity('ToolPinsRepository', 'blocksChangedTools', (s) => repo(s, 'ToolPinsRepository').blocksChangedTools(s.w.ws));
parity('ToolPinsRepository', 'putSettings', async (s) => {
  const t = repo(s, 'ToolPinsRepository');
  await tx(s, (x) => t.putSettings(s.w.ws, { blockChangedTools: true, updatedBy: 'token:parity' }, x));
  const on = await t.blocksChangedTools(s.w.ws);
  await tx(s, (x) => t.putSettings(s.w.ws2, { blockChangedTools: false, updatedBy: 'token:parity' }, x));
  return [on, await t.blocksChangedTools(s.w.ws2)];
});
parity('ToolPinsRepository', 'pin', async (s) => {
  const t = repo(s, 'ToolPinsRepository');
  await tx(s, (x) =>
    t.pin(
      s.w.ws,
      'github',
      '1.0.0',
      [
        ['merge_pr', hash('m1')],
        ['get_issue', hash('g1')],
      ],
      x,
    ),
  );
  // pinned once: a second sight of the same version changes nothing
  await tx(s, (x) => t.pin(s.w.ws, 'github', '1.0.0', [['merge_pr', hash('other')]], x));
  await tx(s, (x) => t.pin(s.w.ws, 'github', '1.1.0', [['merge_pr', hash('m2')]], x));
  return t.pins(s.w.ws, 'github');
});
parity('ToolPinsRepository', 'pins', async (s) => [
  await repo(s, 'ToolPinsRepository').pins(s.w.ws, 'github', { version: '1.1.0' }),
  await repo(s, 'ToolPinsRepository').pins(s.w.ws2, 'github'),
]);
parity('ToolPinsRepository', 'markChanged', async (s) => {
  await tx(s, (x) => repo(s, 'ToolPinsRepository').markChanged(s.w.ws, PINNED, hash('m1-changed'), x));
  return repo(s, 'ToolPinsRepository').pins(s.w.ws, 'github', { version: '1.0.0' });
});
parity('ToolPinsRepository', 'changed', async (s) => [
  await tx(s, (x) => repo(s, 'ToolPinsRepository').changed(s.w.ws, 'github', 'merge_pr', x)),
  await tx(s, (x) => repo(s, 'ToolPinsRepository').changed(s.w.ws, 'github', 'get_issue', x)),
]);
parity('ToolPinsRepository', 'accept', async (s) => {
  await tx(s, (x) => repo(s, 'ToolPinsRepository').accept(s.w.ws, PINNED, hash('m1-changed'), 'user:parity', x));
  return [
    await repo(s, 'ToolPinsRepository').pins(s.w.ws, 'github', { version: '1.0.0' }),
    await tx(s, (x) => repo(s, 'ToolPinsRepository').changed(s.w.ws, 'github', 'merge_pr', x)),
  ];
});

// ---- webhooks

const HOOK = uuid(400);
const HOOK2 = uuid(401);
const DELIVERY = uuid(410);
parity('WebhooksRepository', 'create', async (s) => {
  const h = repo(s, 'WebhooksRepository');
  const endpoint = (id: string, overrides: Record<string, unknown> = {}) => ({
    id,
    workspaceId: null,
    name: 'chat-ops',
    url: 'https://hooks.example/1',
    secret: 'sealed',
    events: ['*'],
    format: 'json',
    createdBy: 'token:parity',
    ...overrides,
  });
  return steps(
    () => tx(s, (x) => h.create(s.w.org, endpoint(HOOK), x)),
    () =>
      tx(s, (x) =>
        h.create(
          s.w.org,
          endpoint(HOOK2, {
            workspaceId: s.w.ws2.workspaceId,
            name: 'two only',
            events: ['approval.*'],
            format: 'slack',
          }),
          x,
        ),
      ),
    () => tx(s, (x) => h.create(s.w.org, endpoint(HOOK), x)),
  );
});
parity('WebhooksRepository', 'list', async (s) => [
  await repo(s, 'WebhooksRepository').list(s.w.org, PAGE),
  await repo(s, 'WebhooksRepository').list(s.w.orgB, PAGE),
]);
parity('WebhooksRepository', 'get', async (s) => [
  await tx(s, (x) => repo(s, 'WebhooksRepository').get(s.w.org, HOOK2, x)),
  await repo(s, 'WebhooksRepository').get(s.w.orgB, HOOK2),
]);
parity('WebhooksRepository', 'update', async (s) => {
  const h = repo(s, 'WebhooksRepository');
  return [
    await tx(s, (x) =>
      h.update(s.w.org, HOOK, { events: ['approval.*', 'secret.*'], enabled: true, format: 'json' }, x),
    ),
    await tx(s, (x) => h.update(s.w.orgB, HOOK, { enabled: false }, x)),
  ];
});
parity('WebhooksRepository', 'pause', async (s) => {
  const h = repo(s, 'WebhooksRepository');
  return [
    await tx(s, (x) => h.pause(s.w.org, HOOK2, 'failing for a day', x)),
    await tx(s, (x) => h.pause(s.w.org, HOOK2, 'again', x)),
    await h.get(s.w.org, HOOK2),
  ];
});
parity('WebhooksRepository', 'subscribers', async (s) => {
  const h = repo(s, 'WebhooksRepository');
  const names = async (workspaceId: string | null) =>
    by((await tx(s, (x) => h.subscribers(s.w.org, workspaceId, x))) as { name: string }[], (e) => e.name);
  return [await names(s.w.ws.workspaceId), await names(s.w.ws2.workspaceId), await names(null)];
});
parity('WebhooksRepository', 'anyTaking', async (s) => [
  await repo(s, 'WebhooksRepository').anyTaking(s.w.org),
  await repo(s, 'WebhooksRepository').anyTaking(s.w.orgB),
]);
parity('WebhooksRepository', 'resume', async (s) => {
  const h = repo(s, 'WebhooksRepository');
  return [
    await tx(s, (x) => h.resume(s.w.org, HOOK2, x)),
    await tx(s, (x) => h.resume(s.w.org, HOOK2, x)),
    await h.get(s.w.org, HOOK2),
  ];
});
parity('WebhooksRepository', 'workspaceSlugs', async (s) => [
  await repo(s, 'WebhooksRepository').workspaceSlugs(s.w.org, [s.w.ws2.workspaceId, s.w.ws2.workspaceId, uuid(991)]),
  await repo(s, 'WebhooksRepository').workspaceSlugs(s.w.org, []),
]);
parity('WebhooksRepository', 'addDelivery', async (s) => {
  const h = repo(s, 'WebhooksRepository');
  return [
    await tx(s, (x) =>
      h.addDelivery(s.w.org, { id: DELIVERY, endpointId: HOOK, eventId: '17', eventType: 'secret.written' }, x),
    ),
    await tx(s, (x) =>
      h.addDelivery(s.w.org, { id: uuid(411), endpointId: HOOK, eventId: '17', eventType: 'secret.written' }, x),
    ),
    await tx(s, (x) =>
      h.addDelivery(s.w.org, { id: uuid(412), endpointId: HOOK2, eventId: '17', eventType: 'secret.written' }, x),
    ),
  ];
});
parity('WebhooksRepository', 'delivery', async (s) => [
  await repo(s, 'WebhooksRepository').delivery(s.w.org, DELIVERY),
  await repo(s, 'WebhooksRepository').delivery(s.w.orgB, DELIVERY),
]);
parity('WebhooksRepository', 'claimSend', async (s) => {
  const h = repo(s, 'WebhooksRepository');
  return [
    await h.claimSend(s.w.org, DELIVERY, 'run-1', 60_000),
    await h.claimSend(s.w.org, DELIVERY, 'run-2', 60_000),
    await h.claimSend(s.w.org, DELIVERY, 'run-1', 60_000),
    await h.claimSend(s.w.org, DELIVERY, 'run-3', -60_000),
  ];
});
parity('WebhooksRepository', 'recordAttempt', async (s) => {
  const h = repo(s, 'WebhooksRepository');
  return [
    await tx(s, (x) =>
      h.recordAttempt(s.w.org, DELIVERY, { status: 503, error: 'HTTP 503', durationMs: 12, outcome: 'pending' }, x),
    ),
    await tx(s, (x) =>
      h.recordAttempt(
        s.w.org,
        uuid(412),
        { status: null, error: 'connection refused', durationMs: 3, outcome: 'failed' },
        x,
      ),
    ),
    await tx(s, (x) =>
      h.recordAttempt(s.w.org, uuid(990), { status: 200, error: null, durationMs: 1, outcome: 'delivered' }, x),
    ),
  ];
});
parity('WebhooksRepository', 'overdue', async (s) => {
  const h = repo(s, 'WebhooksRepository');
  const query = { dueBefore: FUTURE, sendingBefore: FUTURE, backoffMs: 1000, maxAttempts: 5, after: null, limit: 10 };
  return [
    await h.overdue(SYSTEM, query),
    await h.overdue(SYSTEM, { ...query, dueBefore: PAST }),
    await h.overdue(SYSTEM, { ...query, maxAttempts: 1 }),
    await h.overdue(SYSTEM, { ...query, after: DELIVERY }),
  ];
});
parity('WebhooksRepository', 'setStatus', async (s) => {
  await repo(s, 'WebhooksRepository').setStatus(s.w.org, uuid(412), 'failed');
  await tx(s, (x) => repo(s, 'WebhooksRepository').setStatus(s.w.orgB, DELIVERY, 'skipped', x));
  return [
    await repo(s, 'WebhooksRepository').delivery(s.w.org, uuid(412)),
    await repo(s, 'WebhooksRepository').delivery(s.w.org, DELIVERY),
  ];
});
parity('WebhooksRepository', 'markFailing', async (s) => {
  const h = repo(s, 'WebhooksRepository');
  const first = await h.markFailing(s.w.org, HOOK2);
  return [
    first,
    (await h.markFailing(s.w.org, HOOK2))?.getTime() === first?.getTime(),
    await h.markFailing(s.w.org, uuid(989)),
  ];
});
parity('WebhooksRepository', 'failedSince', async (s) => [
  await repo(s, 'WebhooksRepository').failedSince(s.w.org, HOOK2, PAST),
  await repo(s, 'WebhooksRepository').failedSince(s.w.org, HOOK2, FUTURE),
  await repo(s, 'WebhooksRepository').failedSince(s.w.org, HOOK, PAST),
]);
parity('WebhooksRepository', 'markHealthy', async (s) => {
  await repo(s, 'WebhooksRepository').markHealthy(s.w.org, HOOK2);
  return ((await repo(s, 'WebhooksRepository').get(s.w.org, HOOK2)) as { failingSince: Date | null }).failingSince;
});
parity('WebhooksRepository', 'deliveries', async (s) => {
  const h = repo(s, 'WebhooksRepository');
  const all = (await h.deliveries(s.w.org, HOOK, PAGE)) as { createdAt: Date; id: string }[];
  return [
    all,
    await h.deliveries(s.w.org, HOOK2, PAGE),
    await h.deliveries(s.w.org, HOOK, { after: { createdAt: all[0]!.createdAt, id: all[0]!.id }, take: 10 }),
  ];
});
parity('WebhooksRepository', 'delete', async (s) => {
  const h = repo(s, 'WebhooksRepository');
  return [
    await tx(s, (x) => h.delete(s.w.orgB, HOOK, x)),
    await tx(s, (x) => h.delete(s.w.org, HOOK, x)),
    await tx(s, (x) => h.delete(s.w.org, HOOK, x)),
    await h.delivery(s.w.org, DELIVERY),
  ];
});

// ---- OAuth: oidc-provider's entries, the grants people gave clients, the organisation's settings

const OAUTH_GRANT = {
  grantId: 'grant-parity-1',
  clientId: 'https://client.example.com/metadata.json',
  clientName: 'Parity Client',
  registration: 'metadata_document',
  resource: 'https://aileron.example.com/mcp/one',
  scope: 'mcp',
};
parity('OauthRepository', 'upsertEntry', async (s) => {
  const o = repo(s, 'OauthRepository');
  const entry = (n: number, expiresAt: Date | null) => ({
    payload: { n },
    grantId: OAUTH_GRANT.grantId,
    uid: `uid-${n}`,
    expiresAt,
  });
  return [
    await o.upsertEntry(SYSTEM, 'AccessToken', 'token-1', entry(1, FUTURE)),
    await o.upsertEntry(SYSTEM, 'AccessToken', 'token-1', entry(2, FUTURE)),
    await o.upsertEntry(SYSTEM, 'AuthorizationCode', 'code-1', entry(3, PAST)),
    await o.upsertEntry(SYSTEM, 'Grant', OAUTH_GRANT.grantId, {
      payload: { g: 1 },
      grantId: null,
      uid: null,
      expiresAt: null,
    }),
  ];
});
parity('OauthRepository', 'findEntry', async (s) => {
  const o = repo(s, 'OauthRepository');
  return [
    await o.findEntry(SYSTEM, 'AccessToken', 'token-1', THEN),
    // an expired entry is not found
    await o.findEntry(SYSTEM, 'AuthorizationCode', 'code-1', THEN),
    await o.findEntry(SYSTEM, 'AccessToken', 'nobody', THEN),
  ];
});
parity('OauthRepository', 'findEntryByUid', async (s) => [
  await repo(s, 'OauthRepository').findEntryByUid(SYSTEM, 'AccessToken', 'uid-2', THEN),
  await repo(s, 'OauthRepository').findEntryByUid(SYSTEM, 'AccessToken', 'uid-9', THEN),
]);
parity('OauthRepository', 'consumeEntry', async (s) => {
  const o = repo(s, 'OauthRepository');
  await o.consumeEntry(SYSTEM, 'AccessToken', 'token-1', at(5));
  return o.findEntry(SYSTEM, 'AccessToken', 'token-1', THEN);
});
parity('OauthRepository', 'sweepExpiredEntries', async (s) => [
  await repo(s, 'OauthRepository').sweepExpiredEntries(SYSTEM, THEN),
  await repo(s, 'OauthRepository').sweepExpiredEntries(SYSTEM, THEN),
]);
parity('OauthRepository', 'createGrant', async (s) => {
  const o = repo(s, 'OauthRepository');
  const answers = await steps(
    () => tx(s, (x) => o.createGrant(s.w.ws, { userId: s.w.ada, ...OAUTH_GRANT }, x)),
    // one provider grant is one row
    () => tx(s, (x) => o.createGrant(s.w.ws, { userId: s.w.ada, ...OAUTH_GRANT }, x)),
    () => tx(s, (x) => o.createGrant(s.w.ws, { userId: s.w.ada, ...OAUTH_GRANT, grantId: 'grant-parity-2' }, x)),
  );
  s.w.oauthGrant = (answers[0] as { id: string }).id;
  s.w.oauthGrant2 = (answers[2] as { id: string }).id;
  return answers;
});
parity('OauthRepository', 'findGrantByProviderGrant', async (s) => [
  await repo(s, 'OauthRepository').findGrantByProviderGrant(SYSTEM, OAUTH_GRANT.grantId),
  await repo(s, 'OauthRepository').findGrantByProviderGrant(SYSTEM, 'nobody'),
]);
parity('OauthRepository', 'touchGrant', async (s) => {
  await repo(s, 'OauthRepository').touchGrant(s.w.org, s.w.oauthGrant, at(60));
  return repo(s, 'OauthRepository').findGrantByProviderGrant(SYSTEM, OAUTH_GRANT.grantId);
});
parity('OauthRepository', 'listGrants', async (s) => [
  await repo(s, 'OauthRepository').listGrants(s.w.org, {}, PAGE),
  await repo(s, 'OauthRepository').listGrants(s.w.org, { workspaceId: s.w.ws2.workspaceId }, PAGE),
  await repo(s, 'OauthRepository').listGrants(s.w.orgB, { userId: s.w.ada }, PAGE),
]);
parity('OauthRepository', 'lapsedGrants', async (s) => [
  // the first grant's provider entry has no expiry: not lapsed; the second has none at all
  await repo(s, 'OauthRepository').lapsedGrants(SYSTEM, new Date(Date.now() + 2 * 3_600_000), 10),
  await repo(s, 'OauthRepository').lapsedGrants(SYSTEM, THEN, 10),
]);
parity('OauthRepository', 'workspaceNames', async (s) => [
  await repo(s, 'OauthRepository').workspaceNames(s.w.ws),
  await repo(s, 'OauthRepository').workspaceNames(SystemScopes.workspace(s.w.orgId, { id: uuid(998), slug: 'none' })),
]);
parity('OauthRepository', 'settings', async (s) => [
  await repo(s, 'OauthRepository').settings(s.w.org),
  await repo(s, 'OauthRepository').anyAllowsDynamicRegistration(SYSTEM),
]);
parity('OauthRepository', 'putSettings', async (s) => {
  const o = repo(s, 'OauthRepository');
  return [await tx(s, (x) => o.putSettings(s.w.org, { allowDynamicRegistration: true }, x)), await o.settings(s.w.org)];
});
parity('OauthRepository', 'anyAllowsDynamicRegistration', async (s) => [
  await repo(s, 'OauthRepository').anyAllowsDynamicRegistration(SYSTEM),
  await tx(s, (x) => repo(s, 'OauthRepository').putSettings(s.w.org, { allowDynamicRegistration: false }, x)),
  await repo(s, 'OauthRepository').anyAllowsDynamicRegistration(SYSTEM),
]);
parity('OauthRepository', 'findUserForAccount', async (s) => [
  await repo(s, 'OauthRepository').findUserForAccount(SYSTEM, s.w.ada),
  await repo(s, 'OauthRepository').findUserForAccount(SYSTEM, uuid(997)),
]);
parity('OauthRepository', 'destroyEntry', async (s) => {
  const o = repo(s, 'OauthRepository');
  await o.destroyEntry(SYSTEM, 'AccessToken', 'token-1');
  return o.findEntry(SYSTEM, 'AccessToken', 'token-1', THEN);
});
parity('OauthRepository', 'destroyEntriesOfGrant', async (s) => {
  const o = repo(s, 'OauthRepository');
  await o.upsertEntry(SYSTEM, 'RefreshToken', 'refresh-1', {
    payload: {},
    grantId: OAUTH_GRANT.grantId,
    uid: null,
    expiresAt: FUTURE,
  });
  await o.destroyEntriesOfGrant(SYSTEM, 'RefreshToken', OAUTH_GRANT.grantId);
  return o.findEntry(SYSTEM, 'RefreshToken', 'refresh-1', THEN);
});
parity('OauthRepository', 'destroyEverythingOfGrants', async (s) => {
  const o = repo(s, 'OauthRepository');
  await o.upsertEntry(SYSTEM, 'AccessToken', 'token-2', {
    payload: {},
    grantId: 'grant-parity-2',
    uid: null,
    expiresAt: FUTURE,
  });
  return [
    await tx(s, (x) => o.destroyEverythingOfGrants(s.w.org, ['grant-parity-2', 'nobody'], x)),
    await tx(s, (x) => o.destroyEverythingOfGrants(s.w.org, [], x)),
  ];
});
parity('OauthRepository', 'deleteGrant', async (s) => {
  const o = repo(s, 'OauthRepository');
  return [
    // another person's filter finds nothing
    await tx(s, (x) => o.deleteGrant(s.w.org, s.w.oauthGrant2, { userId: s.w.bob }, x)),
    await tx(s, (x) => o.deleteGrant(s.w.org, s.w.oauthGrant2, { workspaceId: s.w.ws.workspaceId }, x)),
    await tx(s, (x) => o.deleteGrant(s.w.org, s.w.oauthGrant2, {}, x)),
  ];
});
parity('OauthRepository', 'deleteGrantsOfUser', async (s) => {
  const o = repo(s, 'OauthRepository');
  return [
    await tx(s, (x) => o.deleteGrantsOfUser(s.w.org, s.w.ada, x)),
    await tx(s, (x) => o.deleteGrantsOfUser(s.w.org, s.w.ada, x)),
  ];
});

// ---- upstream connections: the pool's OAuth connections and the ones being made

const UPSTREAM = {
  authorizationServer: 'https://as.upstream.example',
  metadata: { issuer: 'https://as.upstream.example', token_endpoint: 'https://as.upstream.example/token' },
  resource: 'https://mcp.upstream.example/mcp',
  redirectUri: 'https://aileron.example.com/oauth/connections/callback',
  client: { client_id: 'pool-client', registration: 'dynamic', secret: null },
};
const connected = (subject: string, userId: string | null, at: Date) => ({
  server: 'upstream',
  subject,
  userId,
  upstream: UPSTREAM,
  createdBy: `user:${userId ?? 'admin'}`,
  at,
  scope: 'mcp:tools',
  accessExpiresAt: FUTURE,
  hasRefreshToken: true,
});
parity('ConnectionsRepository', 'saveConnected', async (s) => {
  const c = repo(s, 'ConnectionsRepository');
  const answers = await steps(
    () => tx(s, (x) => c.saveConnected(s.w.ws, connected(`user:${s.w.ada}`, s.w.ada, at(1)), x)),
    () => tx(s, (x) => c.saveConnected(s.w.ws, connected('workspace', null, at(2)), x)),
    // the same person again: their connection is replaced, the same row, a new generation
    () => tx(s, (x) => c.saveConnected(s.w.ws, { ...connected(`user:${s.w.ada}`, s.w.ada, at(3)), scope: null }, x)),
    () => tx(s, (x) => c.saveConnected(s.w.ws2, connected(`user:${s.w.bob}`, s.w.bob, at(4)), x)),
  );
  s.w.adaConnection = (answers[0] as { id: string }).id;
  s.w.workspaceConnection = (answers[1] as { id: string }).id;
  s.w.bobConnection = (answers[3] as { id: string }).id;
  return answers;
});
parity('ConnectionsRepository', 'list', async (s) => {
  const c = repo(s, 'ConnectionsRepository');
  return [
    await c.list(s.w.ws, {}, PAGE),
    await c.list(s.w.ws, { subjects: ['workspace'] }, PAGE),
    await c.list(s.w.ws, { server: 'elsewhere' }, PAGE),
    await c.list(s.w.ws, {}, { after: { createdAt: at(2), id: s.w.workspaceConnection }, take: 10 }),
    await c.list(s.w.ws2, {}, PAGE),
  ];
});
parity('ConnectionsRepository', 'find', async (s) => [
  await repo(s, 'ConnectionsRepository').find(s.w.ws, s.w.adaConnection),
  await tx(s, (x) => repo(s, 'ConnectionsRepository').find(s.w.ws, s.w.workspaceConnection, x)),
  // another workspace's is not found
  await repo(s, 'ConnectionsRepository').find(s.w.ws, s.w.bobConnection),
]);
parity('ConnectionsRepository', 'findBySubject', async (s) => [
  await repo(s, 'ConnectionsRepository').findBySubject(s.w.ws, 'upstream', 'workspace'),
  await tx(s, (x) => repo(s, 'ConnectionsRepository').findBySubject(s.w.ws, 'upstream', `user:${s.w.ada}`, x)),
  await repo(s, 'ConnectionsRepository').findBySubject(s.w.ws, 'upstream', `user:${s.w.bob}`),
]);
parity('ConnectionsRepository', 'takeLease', async (s) => {
  const c = repo(s, 'ConnectionsRepository');
  return [
    // the generation the taker read is stale: no lease
    await c.takeLease(s.w.ws, s.w.adaConnection, 1, 'replica-a', at(30), THEN),
    await c.takeLease(s.w.ws, s.w.adaConnection, 2, 'replica-a', at(30), THEN),
    // held by another until then
    await c.takeLease(s.w.ws, s.w.adaConnection, 2, 'replica-b', at(30), at(10)),
    // and free again once it ran out
    await c.takeLease(s.w.ws, s.w.adaConnection, 2, 'replica-b', at(90), at(31)),
    await c.takeLease(s.w.ws2, s.w.adaConnection, 2, 'replica-c', at(30), THEN),
  ];
});
parity('ConnectionsRepository', 'saveRefreshed', async (s) => {
  const c = repo(s, 'ConnectionsRepository');
  const facts = { scope: 'mcp:tools', accessExpiresAt: at(3600), hasRefreshToken: true };
  return [
    // replica-a lost the lease to replica-b: its refresh is not stored
    await tx(s, (x) => c.saveRefreshed(s.w.ws, s.w.adaConnection, 'replica-a', facts, at(40), x)),
    await tx(s, (x) => c.saveRefreshed(s.w.ws, s.w.adaConnection, 'replica-b', facts, at(40), x)),
    await c.find(s.w.ws, s.w.adaConnection),
  ];
});
parity('ConnectionsRepository', 'releaseLease', async (s) => {
  const c = repo(s, 'ConnectionsRepository');
  await c.takeLease(s.w.ws, s.w.workspaceConnection, 1, 'replica-a', at(30), THEN);
  await c.releaseLease(s.w.ws, s.w.workspaceConnection, 'replica-b');
  const held = await c.find(s.w.ws, s.w.workspaceConnection);
  await c.releaseLease(s.w.ws, s.w.workspaceConnection, 'replica-a');
  return [held, await c.find(s.w.ws, s.w.workspaceConnection)];
});
parity('ConnectionsRepository', 'markNeedsReconnect', async (s) => {
  const c = repo(s, 'ConnectionsRepository');
  return [
    await tx(s, (x) => c.markNeedsReconnect(s.w.ws, s.w.workspaceConnection, 7, 'stale generation', x)),
    await tx(s, (x) => c.markNeedsReconnect(s.w.ws, s.w.workspaceConnection, 1, 'refused', x)),
    await tx(s, (x) => c.markNeedsReconnect(s.w.ws, s.w.workspaceConnection, 1, 'again', x)),
    await c.find(s.w.ws, s.w.workspaceConnection),
    // a connection that needs a reconnect gives no lease
    await c.takeLease(s.w.ws, s.w.workspaceConnection, 1, 'replica-a', at(30), THEN),
  ];
});
parity('ConnectionsRepository', 'touch', async (s) => {
  await repo(s, 'ConnectionsRepository').touch(s.w.ws, s.w.adaConnection, at(120));
  await repo(s, 'ConnectionsRepository').touch(s.w.ws2, s.w.adaConnection, at(240));
  return ((await repo(s, 'ConnectionsRepository').find(s.w.ws, s.w.adaConnection)) as { lastUsedAt: Date }).lastUsedAt;
});
parity('ConnectionsRepository', 'createStart', async (s) => {
  const c = repo(s, 'ConnectionsRepository');
  const start = (stateHash: string, expiresAt: Date) => ({
    server: 'upstream',
    subject: `user:${s.w.ada}`,
    userId: s.w.ada,
    stateHash,
    bindingHash: hash('binding'),
    upstream: UPSTREAM,
    scope: 'mcp:tools offline_access',
    expiresAt,
  });
  return steps(
    () => tx(s, (x) => c.createStart(s.w.ws, start(hash('state-1'), FUTURE), x)),
    () => tx(s, (x) => c.createStart(s.w.ws, start(hash('state-2'), PAST), x)),
    () => tx(s, (x) => c.createStart(s.w.ws2, start(hash('state-3'), PAST), x)),
    // a state is one start's
    () => tx(s, (x) => c.createStart(s.w.ws, start(hash('state-1'), FUTURE), x)),
  );
});
parity('ConnectionsRepository', 'takeStart', async (s) => {
  const c = repo(s, 'ConnectionsRepository');
  return [
    await tx(s, (x) => c.takeStart(SYSTEM, hash('state-1'), x)),
    // once
    await tx(s, (x) => c.takeStart(SYSTEM, hash('state-1'), x)),
    await tx(s, (x) => c.takeStart(SYSTEM, hash('nobody'), x)),
  ];
});
parity('ConnectionsRepository', 'takeExpiredStarts', async (s) => {
  const c = repo(s, 'ConnectionsRepository');
  return [
    by((await c.takeExpiredStarts(SYSTEM, THEN, 10)) as { workspaceSlug: string }[], (r) => r.workspaceSlug),
    await c.takeExpiredStarts(SYSTEM, THEN, 10),
  ];
});
parity('ConnectionsRepository', 'delete', async (s) => {
  const c = repo(s, 'ConnectionsRepository');
  return [
    // another person's filter finds nothing, nor does another workspace
    await tx(s, (x) => c.delete(s.w.ws, s.w.workspaceConnection, { subject: `user:${s.w.ada}` }, x)),
    await tx(s, (x) => c.delete(s.w.ws2, s.w.workspaceConnection, {}, x)),
    await tx(s, (x) => c.delete(s.w.ws, s.w.workspaceConnection, { subject: 'workspace' }, x)),
    await tx(s, (x) => c.delete(s.w.ws, s.w.workspaceConnection, {}, x)),
  ];
});
parity('ConnectionsRepository', 'deleteOfUser', async (s) => {
  const c = repo(s, 'ConnectionsRepository');
  return [
    await tx(s, (x) => c.deleteOfUser(s.w.orgB, s.w.ada, x)),
    await tx(s, (x) => c.deleteOfUser(s.w.org, s.w.ada, x)),
    await tx(s, (x) => c.deleteOfUser(s.w.org, s.w.ada, x)),
    await c.list(s.w.ws2, {}, PAGE),
  ];
});

// ---- offboarding a person (last: it ends and removes what earlier cases made)
parity('AuthRepository', 'tokensOwnedBy', async (s) => {
  const a = repo(s, 'AuthRepository');
  // a token made with ada's token is ada's too
  await tx(s, (x) =>
    a.createToken(
      s.w.org,
      {
        name: 'made-by-ci',
        role: 'member',
        workspaceId: null,
        hash: hash('t-offboard'),
        prefix: 'ail_4',
        createdBy: `token:${s.w.token2}`,
        expiresAt: null,
      },
      x,
    ),
  );
  const owned = (await a.tokensOwnedBy(s.w.org, s.w.ada)) as string[];
  s.w.adaTokens = owned;
  // ids in no promised order: how many, and which of the ones this file made
  return [
    owned.length,
    [s.w.token1, s.w.token2].map((id: string) => owned.includes(id)),
    await a.tokensOwnedBy(s.w.orgB, s.w.ada),
    await a.tokensOwnedBy(s.w.org, s.w.bob),
  ];
});
parity('AuthRepository', 'revokeTokens', async (s) => {
  const a = repo(s, 'AuthRepository');
  return [
    by((await tx(s, (x) => a.revokeTokens(s.w.org, s.w.adaTokens, at(100), x))) as { id: string }[], (t) => t.id),
    // revoked already: nothing more; another organisation's scope reaches nothing
    await tx(s, (x) => a.revokeTokens(s.w.org, s.w.adaTokens, at(200), x)),
    await tx(s, (x) => a.revokeTokens(s.w.orgB, [s.w.token1], at(200), x)),
    await tx(s, (x) => a.revokeTokens(s.w.org, [], at(200), x)),
  ];
});
parity('GatewayRepository', 'lockEnrolledBy', (s) =>
  tx(s, async (x) => [
    await repo(s, 'GatewayRepository').lockEnrolledBy(s.w.org, ['token:parity'], x),
    await repo(s, 'GatewayRepository').lockEnrolledBy(s.w.orgB, ['token:parity'], x),
    await repo(s, 'GatewayRepository').lockEnrolledBy(s.w.org, ['user:nobody'], x),
  ]),
);
parity('GatewayRepository', 'lockEnrolledByIn', (s) =>
  tx(s, async (x) => [
    await repo(s, 'GatewayRepository').lockEnrolledByIn(s.w.ws, ['token:parity'], x),
    // the same organisation's other workspace holds none of them
    await repo(s, 'GatewayRepository').lockEnrolledByIn(s.w.ws2, ['token:parity'], x),
    await repo(s, 'GatewayRepository').lockEnrolledByIn(s.w.ws, ['user:nobody'], x),
  ]),
);
parity('AgentSessionsRepository', 'liveStartedBy', (s) =>
  tx(s, async (x) => {
    const r = repo(s, 'AgentSessionsRepository');
    return [
      by((await r.liveStartedBy(x, s.w.org, [`token:${uuid(310)}`], THEN)) as { id: string }[], (r) =>
        JSON.stringify({ ...r, id: undefined }),
      ),
      await r.liveStartedBy(x, s.w.org, [`token:${uuid(310)}`], new Date('2050-01-01T00:00:00.000Z')),
      await r.liveStartedBy(x, s.w.orgB, [`token:${uuid(310)}`], THEN),
      await r.liveStartedBy(x, s.w.org, [`user:${s.w.ada}`], THEN),
    ];
  }),
);
parity('ApprovalsRepository', 'lockPendingOf', async (s) => {
  const a = repo(s, 'ApprovalsRepository');
  const created = (await tx(s, (x) =>
    a.create(s.w.ws, approval(s, { argumentsDigest: hash('offboard'), expiresAt: FUTURE }), x),
  )) as { id: string };
  const of = (overrides: Record<string, string[]>) => ({
    requesters: [],
    requestedBy: [],
    gatewayIds: [],
    agentSessionIds: [],
    ...overrides,
  });
  return tx(s, async (x) => [
    created.id,
    by(
      (await a.lockPendingOf(x, s.w.org, of({ requesters: ['user:ADA@example.com'] }), THEN)) as {
        record: { argumentsDigest: string };
      }[],
      (r) => r.record.argumentsDigest,
    ),
    by(
      (await a.lockPendingOf(x, s.w.org, of({ gatewayIds: [s.w.gateway] }), THEN)) as {
        record: { argumentsDigest: string };
      }[],
      (r) => r.record.argumentsDigest,
    ),
    await a.lockPendingOf(x, s.w.orgB, of({ requesters: ['user:ada@example.com'] }), THEN),
    await a.lockPendingOf(x, s.w.org, of({ requestedBy: ['token:nobody'] }), THEN),
  ]);
});
parity('ApprovalsRepository', 'deleteLinksOf', async (s) => {
  const a = repo(s, 'ApprovalsRepository');
  return [
    await tx(s, (x) => a.deleteLinksOf(x, s.w.orgB, s.w.ada)),
    await tx(s, (x) => a.deleteLinksOf(x, s.w.org, s.w.ada)),
    await tx(s, (x) => a.deleteLinksOf(x, s.w.org, s.w.ada)),
  ];
});
parity('TenancyRepository', 'lockForOffboarding', (s) =>
  tx(s, async (x) => {
    const t = repo(s, 'TenancyRepository');
    return [
      await t.lockForOffboarding(s.w.org, s.w.ada, x),
      await t.lockForOffboarding(s.w.orgB, s.w.ada, x),
      await t.lockForOffboarding(s.w.org, uuid(999), x),
    ];
  }),
);
parity('TenancyRepository', 'setDeactivated', async (s) => {
  const t = repo(s, 'TenancyRepository');
  return [
    await tx(s, (x) => t.setDeactivated(s.w.org, s.w.ada, at(300), x)),
    await tx(s, (x) => t.setDeactivated(s.w.org, s.w.ada, null, x)),
    await steps(() => tx(s, (x) => t.setDeactivated(s.w.orgB, s.w.ada, at(300), x))),
  ];
});
parity('TenancyRepository', 'deleteMembershipsOf', async (s) => {
  const t = repo(s, 'TenancyRepository');
  return [
    await tx(s, (x) => t.deleteMembershipsOf(s.w.orgB, s.w.ada, x)),
    await tx(s, (x) => t.deleteMembershipsOf(s.w.org, s.w.ada, x)),
    await tx(s, (x) => t.deleteMembershipsOf(s.w.org, s.w.ada, x)),
  ];
});
parity('TenancyRepository', 'deleteUser', async (s) => {
  const t = repo(s, 'TenancyRepository');
  const carol = await tx(s, (x) =>
    t.createUser(s.w.org, { email: 'dora@example.com', name: 'Dora', role: 'member' }, x),
  );
  return [
    await tx(s, (x) => t.deleteUser(s.w.orgB, (carol as { id: string }).id, x)),
    await t.findUser(s.w.org, (carol as { id: string }).id),
    await tx(s, (x) => t.deleteUser(s.w.org, (carol as { id: string }).id, x)),
    await t.findUser(s.w.org, (carol as { id: string }).id),
  ];
});

/** `export class X extends Repository` in every *.repository.ts under libs/. */
function repositoriesInSource(): string[] {
  const root = join(__dirname, '../..');
  const files = readdirSync(join(root, 'libs'), { recursive: true, encoding: 'utf8' }).filter((f) =>
    f.endsWith('.repository.ts'),
  );
  return files.flatMap((file) =>
    [...readFileSync(join(root, 'libs', file), 'utf8').matchAll(/export class (\w+) extends Repository\b/g)].map(
      (m) => m[1]!,
    ),
  );
}

describe('every repository method answers alike on PGlite and PostgreSQL', () => {
  const sides = {} as Record<Backend, Side>;
  const normalized = {} as Record<Backend, (value: unknown) => unknown>;
  beforeAll(async () => {
    for (const backend of BACKENDS) {
      sides[backend] = await openSide(backend);
      normalized[backend] = normalizer();
    }
  });
  afterAll(async () => {
    for (const side of Object.values(sides)) await side.close();
  });

  for (const [repository, method, run] of CASES) {
    it(`${repository}.${method}`, async () => {
      const answers = [] as unknown[];
      // a case that throws is broken (what a case expects to fail, it runs in steps)
      for (const backend of BACKENDS) answers.push(normalized[backend](await run(sides[backend])));
      expect(answers[1], `${repository}.${method} on PostgreSQL, against PGlite`).toEqual(answers[0]);
    });
  }

  it('has a case for every method of every repository the app uses', () => {
    const expected = new Set<string>();
    for (const side of Object.values(sides)) {
      for (const [name, instance] of side.repositories) {
        const prototype = Object.getPrototypeOf(instance) as Record<string, unknown>;
        for (const method of Object.getOwnPropertyNames(prototype))
          if (method !== 'constructor' && typeof prototype[method] === 'function') expected.add(`${name}.${method}`);
      }
    }
    // every repository in the source is one the app provides, or this would miss it
    expect([...sides.pglite.repositories.keys()].sort()).toEqual(expect.arrayContaining(repositoriesInSource()));
    expect(CASES.map(([repository, method]) => `${repository}.${method}`).sort()).toEqual([...expected].sort());
  });
});
