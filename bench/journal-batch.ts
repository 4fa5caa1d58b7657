// before any module with Nest decorators loads, or their DI metadata is lost
import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExecutionJournal } from '../libs/pool/src';
import { mainThreadCpuMs, median, note } from './figures';
import { ownerToken, profileControlPlane, startPoolBenchControlPlane } from './pool-bench';

/**
 * What the pool's audit batch costs the control plane's thread per proxied
 * call, on the embedded database and nothing else: an embedded control plane
 * in this process, batches of `CALLS` calls (a start and an end record each,
 * as the pool journals them) appended to the ExecutionJournal and flushed
 * into the audit chain and the outbox, the thread's CPU until each batch has
 * committed. Nothing else runs meanwhile, so two builds run in turn
 * (docs/pool.md § Performance) compare by their medians. With
 * AILERON_BENCH_PROFILE=<dir>, a CPU profile of the counted rounds.
 *
 *   npm run build && node dist/bench/journal-batch.js [rounds [batches]]
 */
const ROUNDS = Number(process.argv[2] ?? 6);
const BATCHES = Number(process.argv[3] ?? 40);
/** what a 200 ms batch holds at the `peers` bench's saturation */
const CALLS = 80;

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'aileron-bench-journal-'));
  const controlPlane = await startPoolBenchControlPlane(dataDir);
  try {
    const me = await fetch(`${controlPlane.url}/v1/me`, {
      headers: { authorization: `Bearer ${ownerToken(controlPlane)}` },
    });
    const body = (await me.json()) as { organization: { id: string }; workspaces: { slug: string }[] };
    // the pool records into the workspace's chain, and its events carry the workspace: /v1/me names it by slug
    const one = await fetch(`${controlPlane.url}/v1/workspaces/${body.workspaces[0]!.slug}`, {
      headers: { authorization: `Bearer ${ownerToken(controlPlane)}` },
    });
    const workspace = (await one.json()) as { id: string; slug: string };
    if (!workspace.id) throw new Error(`no workspace id: ${JSON.stringify(workspace)}`);
    const journal = controlPlane.app.get(ExecutionJournal);
    let serial = 0;
    const batch = (): void => {
      for (let i = 0; i < CALLS; i++) {
        const n = serial++;
        const execution = randomUUID();
        const common = {
          time: new Date().toISOString(),
          organizationId: body.organization.id,
          workspaceId: workspace.id,
          workspaceSlug: workspace.slug,
          sessionId: `0f6a6f7e-4b4e-4c1e-9d1a-${String(n % 16).padStart(12, '0')}`,
          actor: 'token:5b0c1c8e-9a34-4d0e-8a53-3f1c2b7a9d10',
          server: 'everything',
          tool: 'echo',
          decision: 'allow',
        };
        const base = { instance: '2d1f0c8a-6b5e-4f3a-9c2d-1e0f9a8b7c6d', version: '1.0.0' };
        journal.append({
          ...common,
          id: randomUUID(),
          type: 'execution.started',
          data: {
            ...base,
            execution_id: execution,
            arguments: { message: `call ${n}` },
            mcp_session: common.sessionId,
          },
        });
        journal.append({
          ...common,
          id: randomUUID(),
          type: 'execution.succeeded',
          data: {
            ...base,
            execution_id: execution,
            latency_ms: 2.5,
            result_bytes: 64,
            mcp_session: common.sessionId,
          },
        });
      }
    };
    // warm-up: plans, JIT, the tables' first pages
    for (let i = 0; i < 10; i++) {
      batch();
      await journal.flush();
    }
    const profiled = await profileControlPlane('journal-batch');
    const perCall: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const cpu = mainThreadCpuMs()!;
      for (let i = 0; i < BATCHES; i++) {
        batch();
        await journal.flush();
      }
      perCall.push(((mainThreadCpuMs()! - cpu) * 1000) / (BATCHES * CALLS));
      note(`  round ${round + 1}: ${perCall.at(-1)!.toFixed(0)} µs of the thread per call`);
    }
    await profiled?.();
    note(
      `journal batch: median ${median(perCall).toFixed(0)} µs per call (${perCall.map((v) => v.toFixed(0)).join(', ')})`,
    );
  } finally {
    await controlPlane.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  note(error instanceof Error ? (error.stack ?? error.message) : String(error));
  process.exit(1);
});
