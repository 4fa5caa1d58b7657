import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SandboxCgroups } from '@aileron/bubblewrap';
import { compiledRunnerPath, LocalSandboxDriver, type SandboxSpec } from '@aileron/sandboxes';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { textOf } from '../pool/mcp-client';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { anAllowedSandbox, type Box as SandboxBox, sandboxIdOf } from './box';

const TMPFS_MB = 48;
const CPUS = 1.5;
const MEMORY_MB = 128;
/** the sandbox's whole: memory_mb, its /tmp and home, and the runner's 256 MiB */
const SANDBOX_MB = MEMORY_MB + 2 * TMPFS_MB + 256;
const MiB = 1024 * 1024;

interface Box extends SandboxBox {
  workspace: string;
}

/** A process of `mb` MiB written to (under its data limit of MEMORY_MB), that then waits to be killed. */
const allocator = (mb: number): string => `perl -e '$x = "a"; $x x= (${mb} << 20); sleep 600'`;

describe('a local sandbox as a whole: its memory and its share of the CPUs (cgroups, control plane running as root)', () => {
  let cp: TestControlPlane;
  const clients: Client[] = [];
  // the control plane runs in this process: its cgroups are these
  const cgroups = SandboxCgroups.find();

  beforeAll(async () => {
    expect(process.getuid?.(), 'a root control plane writes the cgroups').toBe(0);
    expect(cgroups?.controllers.sort(), 'these machines give the control plane pids, memory and cpu cgroups').toEqual([
      'cpu',
      'memory',
      'pids',
    ]);
    cp = await startApiControlPlane({
      AILERON_SANDBOX_TMPFS_MB: String(TMPFS_MB),
      AILERON_SANDBOX_CPUS: String(CPUS),
      AILERON_SANDBOX_DEFAULT_PIDS: '128',
      AILERON_SANDBOX_BASH_MAX_TIMEOUT_MS: '60000',
    });
  }, 120_000);

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await cp?.close();
  });

  const aSandbox = (name: string, body: Record<string, unknown> = {}): Promise<Box> =>
    anAllowedSandbox(cp, name, clients, body);

  /** the sandbox's memory bound as the kernel has it (cgroup v2 names it memory.max, v1 memory.limit_in_bytes) */
  async function memoryLimit(box: Box): Promise<string> {
    const dir = cgroups!.directory(await sandboxIdOf(cp, box), 'memory')!;
    return readFileSync(
      join(dir, existsSync(join(dir, 'memory.max')) ? 'memory.max' : 'memory.limit_in_bytes'),
      'utf8',
    ).trim();
  }

  it('processes each under memory_mb but together over the sandbox’s memory: the kernel kills one, the answer says the sandbox ran out of memory, and the next call works', async () => {
    const box = await aSandbox('memory-full', { limits: { memory_mb: MEMORY_MB } });
    // one alone is within memory_mb, as a process's data limit has it
    expect((await box.bash(`perl -e '$x = "a"; $x x= (100 << 20); print length($x), "\\n"'`)).stdout).toBe(
      `${100 * MiB}\n`,
    );
    expect(await memoryLimit(box)).toBe(String(SANDBOX_MB * MiB));

    // eight at once are twice the sandbox's memory; the first to end is one the kernel killed (the largest: the command's shell lives on), which ends the command
    const ran = await box.bash(
      `for i in 1 2 3 4 5 6 7 8; do ${allocator(100)} & done; wait -n; code=$?; echo "one ended: $code"; kill $(jobs -p) 2>/dev/null; exit $code`,
      { timeout: 30_000 },
    );
    expect(ran.stdout).toBe(`one ended: ${128 + 9}\n`);
    expect(ran.exitCode, ran.stderr).toBe(128 + 9);
    expect(ran.stderr).toContain(
      `[aileron] the sandbox ran out of its ${SANDBOX_MB} MiB of memory: the kernel killed a process of the sandbox (signal 9, SIGKILL)`,
    );
    expect((await box.bash('echo still here')).stdout).toBe('still here\n');
    // and an answer without a kill says nothing of memory
    expect((await box.bash(allocator(1).replace('sleep 600', 'print "ok\\n"'))).stderr).toBe('');
  });

  it('a command that makes itself no likelier a victim than the runner: the runner is killed, the call says the sandbox ran out of memory, and the next call starts it again', async () => {
    const box = await aSandbox('runner-killed', { limits: { memory_mb: MEMORY_MB } });
    // processes smaller than the runner's Node, at the runner's oom_score_adj (the command's is raised above it), together over the bound
    const ran = await box.call('bash', {
      command: `echo 0 > /proc/self/oom_score_adj || exit 3; for i in $(seq 40); do ${allocator(16)} & done; wait`,
      timeout: 30_000,
    });
    expect(ran.isError, textOf(ran)).toBe(true);
    expect(textOf(ran)).toContain(
      `the sandbox stopped (out of its ${SANDBOX_MB} MiB of memory; the next call starts it again)`,
    );
    expect((await box.bash('echo started again')).stdout).toBe('started again\n');
  });

  it(`AILERON_SANDBOX_CPUS=${CPUS} is the quota of each sandbox’s cpu cgroup`, async () => {
    const box = await aSandbox('cpu-share');
    await box.bash('true');
    expect(cpuLimit(cgroups!, await sandboxIdOf(cp, box))).toBe(`${CPUS * 100_000} 100000`);
  });
});

describe('the local driver with a CPU bound', () => {
  const dir = mkdtempSync(join(tmpdir(), 'aileron-cpus-'));
  const cgroups = SandboxCgroups.find();
  const bound = 0.25;
  const driver = new LocalSandboxDriver({
    stateDir: dir,
    runnerScript: compiledRunnerPath(),
    log: () => undefined,
    cpus: bound,
  });

  afterAll(async () => {
    await driver.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('two busy processes of a sandbox together get no more of the CPUs than the bound', async () => {
    const spec: SandboxSpec = {
      id: randomUUID(),
      organizationId: randomUUID(),
      workspaceId: randomUUID(),
      name: 'busy',
      network: 'none',
      limits: {},
    };
    const runner = await driver.runner(spec);
    expect(cpuLimit(cgroups!, spec.id)).toBe(`${bound * 100_000} 100000`);
    // two processes spin for 3 s of wall time: alone on two CPUs they would get 6 s of CPU, on a busy machine still well over 1 s
    const spun = await runner.call({
      op: 'exec',
      command: `perl -MTime::HiRes=time -e 'my $t0 = time; for (1, 2) { unless (fork) { my $end = $t0 + 3; 1 while time < $end; exit 0 } } wait for 1, 2; my @t = times; printf "%.3f %.3f\\n", $t[2] + $t[3], time - $t0'`,
      workdir: '/src',
      timeoutMs: 30_000,
      limits: {},
    });
    const [cpu, wall] = spun.stdout.trim().split(' ').map(Number) as [number, number];
    expect(wall, spun.stderr).toBeGreaterThanOrEqual(3);
    expect(cpu).toBeGreaterThan(0);
    // the quota holds per 100 ms period: over 30 of them the share is close to the bound (half again for the scheduler's granularity)
    expect(cpu / wall, `${cpu} s of CPU in ${wall} s`).toBeLessThan(bound * 1.5);
  });
});

/** the sandbox's CPU bound as the kernel has it: `quota period` in µs (v2's cpu.max, v1's two files) */
function cpuLimit(cgroups: SandboxCgroups, id: string): string {
  const dir = cgroups.directory(id, 'cpu')!;
  const read = (file: string): string => readFileSync(join(dir, file), 'utf8').trim();
  return existsSync(join(dir, 'cpu.max'))
    ? read('cpu.max')
    : `${read('cpu.cfs_quota_us')} ${read('cpu.cfs_period_us')}`;
}
