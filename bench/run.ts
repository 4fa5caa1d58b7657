// before any module with Nest decorators loads, or their DI metadata is lost
import 'reflect-metadata';
import { auditIngestBench } from './audit-ingest.bench';
import { catalogBench } from './catalog.bench';
import { caveatBench } from './caveat.bench';
import { sandboxBench } from './sandbox.bench';
import { Bench, Figure, note } from './figures';
import { frontBench } from './front.bench';
import { peersBench } from './peers.bench';
import { policyBench } from './policy.bench';
import { proxyBench } from './proxy.bench';
import { sessionsBench } from './sessions.bench';
import { tenantsBench } from './tenants.bench';

const BENCHES: readonly Bench[] = [
  policyBench,
  catalogBench,
  frontBench,
  auditIngestBench,
  proxyBench,
  peersBench,
  caveatBench,
  sandboxBench,
  tenantsBench,
  sessionsBench,
];

async function main(argv: string[]): Promise<number> {
  const wanted = argv.filter((arg) => arg !== '--');
  const unknown = wanted.filter((name) => !BENCHES.some((bench) => bench.name === name));
  if (unknown.length > 0) {
    note(`unknown bench ${unknown.map((name) => JSON.stringify(name)).join(', ')}; known:`);
    for (const bench of BENCHES) note(`  ${bench.name.padEnd(10)} ${bench.summary}`);
    return 2;
  }
  const selected = wanted.length === 0 ? BENCHES : BENCHES.filter((bench) => wanted.includes(bench.name));

  let failed = false;
  for (const bench of selected) {
    note(`» bench ${bench.name}: ${bench.summary}`);
    const started = Date.now();
    let figures: Figure[];
    try {
      figures = await bench.run();
    } catch (error) {
      failed = true;
      note(`» bench ${bench.name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
      continue;
    }
    for (const figure of figures) {
      process.stdout.write(`${JSON.stringify(figure)}\n`);
      if (!figure.ok) failed = true;
    }
    // a bench that measured nothing cannot vouch for anything
    if (figures.length === 0) failed = true;
    note(`» bench ${bench.name}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
  return failed ? 1 : 0;
}

main(process.argv.slice(2)).then(
  // An in-process control plane can leave handles (database, timers) behind
  // after close; the figures are written, so nothing is lost by leaving now.
  (code) => process.exit(code),
  (error: unknown) => {
    note(`bench runner failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    process.exit(1);
  },
);
