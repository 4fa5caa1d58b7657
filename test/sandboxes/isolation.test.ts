import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { textOf } from '../pool/mcp-client';
import { aWorkspace } from '../support/builders';
import { startApiControlPlane, TestControlPlane } from '../support/control-plane';
import { eventually } from '../support/eventually';
import { anAllowedSandbox, type Box as SandboxBox, sandboxIdOf } from './box';

const BASH_MAX_TIMEOUT_MS = 60_000;
const DEFAULT_LIMITS = { pids: 96, memoryMb: 1536, cpuSeconds: 700 };
const TMPFS_MB = 48;
const MAX_PER_WORKSPACE = 2;
/** small enough that a command exceeds it in a moment */
const SRC_BOUND = 4 * 1024 * 1024;

interface Box extends SandboxBox {
  workspace: string;
}

/** Host processes whose command line holds `marker` (an argument a test's command gave its own processes). */
function hostProcessesWith(marker: string): number[] {
  return readdirSync('/proc')
    .filter((pid) => /^\d+$/.test(pid))
    .filter((pid) => {
      try {
        return (
          readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker) &&
          !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'))
        );
      } catch {
        // gone while we looked
        return false;
      }
    })
    .map(Number);
}

/** Live host processes of a uid. */
function hostProcessesOf(uid: number): number[] {
  return readdirSync('/proc')
    .filter((pid) => /^\d+$/.test(pid))
    .filter((pid) => {
      try {
        const status = readFileSync(`/proc/${pid}/status`, 'utf8');
        return Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]) === uid && !/^State:\s+Z/m.test(status);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/**
 * A process that keeps moving away from its pid: it forks, the parent exits
 * at once, the child appends a line to `file` and forks again. `marker` names
 * each of them on the host. Its output stays the command's unless redirected.
 */
function escaper(marker: string, file: string): string {
  return `perl -e '$0 = "${marker}"; while (1) { my $p = fork(); exit 0 if $p; open(my $f, ">>", "${file}"); print $f "x\\n"; close $f; select(undef, undef, undef, 0.02) }'`;
}

/** An escaper that never pauses: its pid changes faster than a pass over /proc can kill it. */
function tightEscaper(marker: string): string {
  return `perl -e '$0 = "${marker}"; while (1) { exit 0 if fork() }'`;
}

/** Counts how many children a fork loop gets before fork fails (at most 300), each child waiting. */
const FORK_LOOP = `perl -e 'my $n = 0; while ($n < 300) { my $p = fork(); last unless defined $p; if ($p == 0) { sleep 60; exit 0 } $n++ } print "$n\\n"'`;

describe('sandbox isolation (local driver, control plane running as root)', () => {
  let cp: TestControlPlane;
  const clients: Client[] = [];

  beforeAll(async () => {
    expect(process.getuid?.(), 'these tests are about a control plane running as root').toBe(0);
    cp = await startApiControlPlane({
      AILERON_SANDBOX_BASH_MAX_TIMEOUT_MS: String(BASH_MAX_TIMEOUT_MS),
      AILERON_SANDBOX_DEFAULT_PIDS: String(DEFAULT_LIMITS.pids),
      AILERON_SANDBOX_DEFAULT_MEMORY_MB: String(DEFAULT_LIMITS.memoryMb),
      AILERON_SANDBOX_DEFAULT_CPU_SECONDS: String(DEFAULT_LIMITS.cpuSeconds),
      AILERON_SANDBOX_TMPFS_MB: String(TMPFS_MB),
      AILERON_SANDBOX_MAX_PER_WORKSPACE: String(MAX_PER_WORKSPACE),
      AILERON_SANDBOX_FILES_SIZE: String(SRC_BOUND),
    });
  }, 120_000);

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await cp?.close();
  });

  const aSandbox = (name: string, body: Record<string, unknown> = {}): Promise<Box> =>
    anAllowedSandbox(cp, name, clients, body);

  /** The sandbox's /src on the host. */
  async function hostSrc(box: Box): Promise<string> {
    return join(cp.cp.config.dataDir, 'sandboxes', await sandboxIdOf(cp, box), 'src');
  }

  it('a command is never the host’s root: /proc/sys is read-only to it, and what it writes belongs to an unprivileged uid of the sandbox’s own', async () => {
    const a = await aSandbox('not-root-a');
    const b = await aSandbox('not-root-b');
    const hostPattern = readFileSync('/proc/sys/kernel/core_pattern', 'utf8');
    // the same value written back: a control plane as it was would accept it (and would accept any other)
    const written = await a.bash(
      'v=$(cat /proc/sys/kernel/core_pattern); printf "%s\\n" "$v" > /proc/sys/kernel/core_pattern; echo "write: $?"',
    );
    expect(written.stdout).toBe('write: 1\n');
    expect(written.stderr).toMatch(/core_pattern: (Read-only file system|Permission denied)/);
    expect(readFileSync('/proc/sys/kernel/core_pattern', 'utf8')).toBe(hostPattern);

    expect((await a.bash('id -u; id -g')).stdout).toBe('1000\n1000\n');
    await a.bash('touch made-by-a');
    await b.bash('touch made-by-b');
    const ownerA = statSync(join(await hostSrc(a), 'made-by-a')).uid;
    const ownerB = statSync(join(await hostSrc(b), 'made-by-b')).uid;
    expect(ownerA).not.toBe(0);
    expect(ownerB).not.toBe(0);
    // one uid per sandbox: RLIMIT_NPROC and DELETE's sweep count one sandbox's processes only
    expect(ownerA).not.toBe(ownerB);
    // and nothing in it runs as the host's root: its processes on the host are its uid's
    expect(hostProcessesOf(ownerA).length).toBeGreaterThan(0);
  });

  it('pids: 64 binds a fork loop', async () => {
    const box = await aSandbox('forky', { limits: { pids: 64 } });
    const forked = Number((await box.bash(FORK_LOOP)).stdout);
    expect(forked).toBeGreaterThan(0);
    expect(forked).toBeLessThan(64);
  });

  it('the defaults apply to a sandbox whose create request names no limits: pids, memory, CPU, and a bounded /tmp and home', async () => {
    const box = await aSandbox('defaulted');
    expect((await box.bash('ulimit -d; ulimit -t; ulimit -u')).stdout).toBe(
      `${DEFAULT_LIMITS.memoryMb * 1024}\n${DEFAULT_LIMITS.cpuSeconds}\n${DEFAULT_LIMITS.pids}\n`,
    );
    expect(Number((await box.bash(FORK_LOOP)).stdout)).toBeLessThan(DEFAULT_LIMITS.pids);
    expect((await box.bash('df --output=size -B1M /tmp "$HOME" | tail -n +2 | tr -d " "')).stdout).toBe(
      `${TMPFS_MB}\n${TMPFS_MB}\n`,
    );
    // a limit the request names still wins
    const named = await aSandbox('named-limit', { limits: { cpu_seconds: 5 } });
    expect((await named.bash('ulimit -t; ulimit -u')).stdout).toBe(`5\n${DEFAULT_LIMITS.pids}\n`);
  });

  it('a process that keeps forking away from its pid ends with its call, at its end and at its timeout', async () => {
    const box = await aSandbox('escapers');
    const src = await hostSrc(box);
    const marker = `aileron-escaper-${randomBytes(4).toString('hex')}`;
    // left in the background, output redirected: the call answers at once, and the escaper must not outlive it
    const ended = await box.bash(
      `${escaper(marker, '/src/hops')} >/dev/null 2>&1 & until [ -s /src/hops ]; do sleep 0.01; done; echo ran`,
    );
    expect(ended.stdout).toBe('ran\n');
    expect(hostProcessesWith(marker), 'an escaper outlived the call that started it').toEqual([]);

    const timedOut = await box.bash(`${escaper(`${marker}-2`, '/src/hops-2')} >/dev/null 2>&1 & sleep 100`, {
      timeout: 1500,
    });
    expect(timedOut.exitCode).toBe(124);
    expect(hostProcessesWith(`${marker}-2`), 'an escaper outlived the timeout').toEqual([]);
    const size = statSync(join(src, 'hops-2')).size;
    expect(size).toBeGreaterThan(0);
    // a later call sees the file as the killed escaper left it
    expect((await box.bash('stat -c %s hops-2')).stdout).toBe(`${size}\n`);
  });

  it('a call whose background process holds its output open still answers at its timeout', async () => {
    const box = await aSandbox('held-open');
    const marker = `aileron-holder-${randomBytes(4).toString('hex')}`;
    const started = Date.now();
    // the escaper keeps the command's stdout: a runner that waits for it to close never answers
    const held = await box.bash(`${tightEscaper(marker)} & sleep 100`, { timeout: 1500 });
    expect(held.exitCode).toBe(124);
    expect(held.stderr).toContain('killed with everything it started');
    expect(Date.now() - started, 'answered long after the timeout').toBeLessThan(30_000);
    expect(hostProcessesWith(marker)).toEqual([]);
  });

  it('DELETE while a command runs answers at once and leaves no process of the sandbox on the host', async () => {
    const box = await aSandbox('deleted-busy');
    const src = await hostSrc(box);
    const marker = `aileron-busy-${randomBytes(4).toString('hex')}`;
    const running = box.call('bash', {
      command: `${escaper(marker, '/src/hops')} & sleep 100`,
      timeout: BASH_MAX_TIMEOUT_MS,
    });
    await eventually('the escaper to run', () => hostProcessesWith(marker).length > 0);
    // the sandbox's host uid, its files' owner (a sandbox gets one when it first starts)
    const uid = statSync(src).uid;
    expect(uid).not.toBe(0);
    const started = Date.now();
    const deleted = await cp.request('DELETE', `/v1/workspaces/${box.workspace}/sandboxes/${box.name}`);
    expect(deleted.status, deleted.text).toBe(204);
    expect(Date.now() - started, 'DELETE waited for the command').toBeLessThan(BASH_MAX_TIMEOUT_MS / 2);
    expect(hostProcessesWith(marker)).toEqual([]);
    expect(hostProcessesOf(uid)).toEqual([]);
    // the call that was running ends too, saying so
    const ended = await running;
    expect(ended.isError).toBe(true);
    expect(textOf(ended)).toContain('stopped');
  });

  it('a command cannot see, signal or trace the runner: no node, only its own processes, no capability, and SIGUSR1 to everything opens no debugger', async () => {
    const box = await aSandbox('runner-apart');
    const seen = await box.bash('pgrep -xc node; ps -eo comm= | sort | tr "\\n" " "; grep ^CapEff /proc/self/status');
    expect(seen.stdout).toMatch(/^0\n(bash |ps |sh |sort |tr )+CapEff:\t0000000000000000\n$/);
    // every pid it can name gets SIGUSR1 (the runner's would open Node's inspector on 9229); then is anything listening?
    const probe = await box.bash(
      'for p in $(ls /proc | grep -E "^[0-9]+$"); do [ "$p" = "$$" ] || kill -USR1 "$p" 2>/dev/null; done; for i in 1 2 3 4 5 6 7 8 9 10; do (exec 3<>/dev/tcp/127.0.0.1/9229) 2>/dev/null && { echo open; exit; }; sleep 0.1; done; echo closed',
    );
    expect(probe.stdout).toBe('closed\n');
    // the runner still answers
    expect((await box.bash('echo still here')).stdout).toBe('still here\n');
  });

  it('a workspace has at most AILERON_SANDBOX_MAX_PER_WORKSPACE sandboxes: one more is 409 SANDBOX_LIMIT_REACHED, another workspace is not counted', async () => {
    const ws = (await aWorkspace(cp, cp.ownerToken)).slug;
    const other = (await aWorkspace(cp, cp.ownerToken)).slug;
    for (let n = 0; n < MAX_PER_WORKSPACE; n++)
      expect((await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, { body: { name: `box-${n}` } })).status).toBe(
        201,
      );
    const refused = await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, { body: { name: 'one-too-many' } });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: 'SANDBOX_LIMIT_REACHED' });
    expect(refused.body.detail).toContain(`${MAX_PER_WORKSPACE} sandboxes`);
    expect((await cp.request('GET', `/v1/workspaces/${ws}/sandboxes/one-too-many`)).status).toBe(404);
    expect((await cp.request('POST', `/v1/workspaces/${other}/sandboxes`, { body: { name: 'box-0' } })).status).toBe(
      201,
    );
    // deleting one makes room
    expect((await cp.request('DELETE', `/v1/workspaces/${ws}/sandboxes/box-0`)).status).toBe(204);
    expect(
      (await cp.request('POST', `/v1/workspaces/${ws}/sandboxes`, { body: { name: 'one-too-many' } })).status,
    ).toBe(201);
  });

  it('/src over its bound (AILERON_SANDBOX_FILES_SIZE): writes are refused with SANDBOX_FULL and files cannot grow, until files are removed', async () => {
    const box = await aSandbox('filled');
    await box.bash(`head -c ${SRC_BOUND + 1024 * 1024} /dev/zero > big`);
    const refused = await eventually('a write to be refused', async () => {
      const written = await box.call('write', { path: 'note.txt', content: 'more\n' });
      return written.isError === true && written;
    });
    expect(textOf(refused)).toContain('SANDBOX_FULL');
    const grown = await box.bash('echo more >> big; echo "append: $?"; rm big; echo removed');
    expect(grown.stdout).toBe('append: 1\nremoved\n');
    expect(grown.stderr).toContain('File too large');
    await eventually('writes to be taken again', async () =>
      textOf(await box.call('write', { path: 'note.txt', content: 'more\n' })).startsWith('Created'),
    );
  });
});
