import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { hashToken, mintApiToken } from '../libs/auth/src/domain/api-token';
import { mintEnrollmentCode, mintGatewayToken } from '../libs/gateway/src/domain/credentials';

/**
 * Many tenants at once for a bench: copies of one organisation that was made
 * through the API, written straight into its tables. Through the API,
 * 10,000 workspaces (each a workspace, a policy, an assignment, a token and an
 * enrolled gateway) would take most of an hour on a small machine; copied,
 * seconds. Each copy is the API's own rows with new ids, new slugs and new
 * credentials, so it holds exactly what the API writes; the bench reads one
 * back through the API to show it (`tenants.bench.ts`).
 *
 * Not copied: what records how the organisation was made rather than what it
 * is (its outbox messages and the audit records made from them). Nothing the
 * benches measure reads them, and 50,000 set-up events draining through the
 * outbox would be background work inside the measurement.
 */

/** The tables an organisation's set-up writes, parents first. */
const COPIED = [
  'organizations',
  'workspaces',
  'api_tokens',
  'policy_versions',
  'catalog_entries',
  'catalog_versions',
  'workspace_servers',
  'gateways',
  'enrollment_codes',
  'gateway_settings',
] as const;
type Table = (typeof COPIED)[number];

/** What records how it was made (outbox_deliveries hang off the messages); anything else the set-up wrote stops the bench. */
const RECORDS = new Set(['outbox_messages', 'audit_events', 'audit_heads', 'audit_checkpoints']);

type Row = Record<string, unknown>;

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

export interface SeededTenant {
  organization: string;
  workspace: string;
  /** the workspace's member API token */
  apiToken: string;
  /** the workspace's enrolled gateway's token */
  gatewayToken: string;
}

export interface SeededOrganization {
  slug: string;
  ownerToken: string;
  tenants: SeededTenant[];
}

/** The organisation `slug` as its tables hold it, and every table the set-up wrote to. */
async function readTemplate(db: pg.Client, slug: string): Promise<{ id: string; rows: Record<Table, Row[]> }> {
  const org = await db.query<{ id: string }>('SELECT id FROM organizations WHERE slug = $1', [slug]);
  const id = org.rows[0]?.id;
  if (!id) throw new Error(`no organisation "${slug}" to copy`);
  const owned = await db.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.columns
      WHERE table_schema = 'public' AND column_name = 'organization_id' ORDER BY table_name`,
  );
  const rows = {} as Record<Table, Row[]>;
  for (const table of COPIED) {
    const where = table === 'organizations' ? 'id' : 'organization_id';
    const result = await db.query<{ row: Row }>(`SELECT to_jsonb(t) AS row FROM ${table} t WHERE ${where} = $1`, [id]);
    rows[table] = result.rows.map((r) => r.row);
  }
  for (const { table_name: table } of owned.rows) {
    if ((COPIED as readonly string[]).includes(table) || RECORDS.has(table)) continue;
    const count = await db.query<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE organization_id = $1`, [id]);
    if (count.rows[0]!.n !== '0')
      throw new Error(`the organisation's set-up also wrote to ${table}: copy it too (bench/tenant-seed.ts)`);
  }
  return { id, rows };
}

/**
 * `count` copies of organisation `template`, slugs from `slugOf`, each in
 * batches of `batch` organisations to a transaction; the credentials of each
 * copy's workspaces, in the order of their slugs.
 */
export async function copyOrganization(
  databaseUrl: string,
  template: string,
  count: number,
  slugOf: (n: number) => { slug: string; name: string },
  batch = 100,
): Promise<SeededOrganization[]> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const { id: templateId, rows } = await readTemplate(db, template);
    const workspaceSlugs = new Map(rows.workspaces.map((w) => [w.id as string, w.slug as string]));
    const seeded: SeededOrganization[] = [];
    for (let first = 0; first < count; first += batch) {
      const out = Object.fromEntries(COPIED.map((table) => [table, [] as Row[]])) as Record<Table, Row[]>;
      for (let n = first; n < Math.min(count, first + batch); n++) {
        const { slug, name } = slugOf(n);
        // every id of the template gets a new one, and every column naming one of them follows it
        const ids = new Map<string, string>([[templateId, randomUUID()]]);
        for (const table of COPIED)
          for (const row of rows[table]) if (typeof row.id === 'string') ids.set(row.id, randomUUID());
        // ids also stand inside strings (`created_by`: `token:<id>`)
        const renamed = (row: Row): Row =>
          Object.fromEntries(
            Object.entries(row).map(([column, value]) => [
              column,
              typeof value === 'string' ? value.replace(UUID, (id) => ids.get(id) ?? id) : value,
            ]),
          );
        const organization: SeededOrganization = { slug, ownerToken: '', tenants: [] };
        const apiTokens = new Map<string, string>();
        const gatewayTokens = new Map<string, string>();
        for (const table of COPIED) {
          for (const template of rows[table]) {
            const row = renamed(template);
            if (table === 'organizations') Object.assign(row, { slug, name });
            if (table === 'api_tokens') {
              const minted = mintApiToken();
              Object.assign(row, { token_hash: minted.hash, prefix: minted.token.slice(0, String(row.prefix).length) });
              if (row.workspace_id === null) organization.ownerToken = minted.token;
              else apiTokens.set(workspaceSlugs.get(template.workspace_id as string)!, minted.token);
            }
            if (table === 'gateways') {
              const token = mintGatewayToken();
              Object.assign(row, { token_hash: hashToken(token), prefix: token.slice(0, String(row.prefix).length) });
              gatewayTokens.set(workspaceSlugs.get(template.workspace_id as string)!, token);
            }
            if (table === 'enrollment_codes') row.code_hash = hashToken(mintEnrollmentCode());
            out[table].push(row);
          }
        }
        if (!organization.ownerToken) throw new Error(`organisation "${template}" has no owner token to copy`);
        for (const workspace of [...workspaceSlugs.values()].sort(bySlugNumber)) {
          const apiToken = apiTokens.get(workspace);
          const gatewayToken = gatewayTokens.get(workspace);
          if (!apiToken || !gatewayToken)
            throw new Error(`workspace "${workspace}" of "${template}" needs one API token and one gateway`);
          organization.tenants.push({ organization: slug, workspace, apiToken, gatewayToken });
        }
        seeded.push(organization);
      }
      await db.query('BEGIN');
      try {
        for (const table of COPIED)
          if (out[table].length > 0)
            await db.query(`INSERT INTO ${table} SELECT * FROM jsonb_populate_recordset(NULL::${table}, $1::jsonb)`, [
              JSON.stringify(out[table]),
            ]);
        await db.query('COMMIT');
      } catch (error) {
        await db.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    }
    return seeded;
  } finally {
    await db.end();
  }
}

/** `w2` before `w10` */
function bySlugNumber(a: string, b: string): number {
  return a.localeCompare(b, 'en', { numeric: true });
}
