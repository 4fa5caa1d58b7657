import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  importSource,
  takeSnapshot,
  RunnerError,
  SandboxSourceError,
  SandboxStartError,
  SNAPSHOT_BRANCH,
  type SandboxSpec,
} from '@aileron/sandboxes';
import { KubernetesSandboxDriver, type KubernetesSandboxOptions } from '@aileron/sandboxes/kubernetes';
import { eventually } from '../support/eventually';
import { expectIgnoredRoots, refusedReadOnly } from './box';
import { FakeKubernetes } from '../support/fake-kubernetes';
import { ProcessKubelet, type FakeImage } from '../support/process-kubelet';
import { listenOnPodIP, runnerPorts, SANDBOX_VERSION as VERSION, sandboxImageMaker } from '../support/sandbox-pods';

/**
 * The Kubernetes sandbox driver end to end, with two things simulated:
 *
 * - the API server: FakeKubernetes, speaking the real REST paths over TLS
 *   with a bearer token and refusing what a real one refuses (objects that
 *   fail the Kubernetes schemas, pods the `restricted` Pod Security Standard
 *   would not admit, duplicates, a Secret changed though immutable);
 * - the kubelet (and scheduler, container runtime, volume provisioner):
 *   ProcessKubelet, which runs each container of a pod as a bubblewrap
 *   process on this machine: the pod's uid, no capabilities, its own pid
 *   namespace, the system read-only, emptyDirs as tmpfs, a directory per
 *   claim that outlives the pod, read-only mounts as the pod says, the
 *   environment from the pod spec and its Secret. Each pod gets its own IP in
 *   127.0.0.0/8; the runner's `--listen <port>` is run as `--listen
 *   <podIP>:<port>`, which is what binding every address means inside a
 *   pod's network namespace. Not simulated: resource limits, NetworkPolicy
 *   enforcement, image pulls (an image here is the runner compiled from this
 *   tree plus the version its ENV would carry).
 *
 * Real: the driver and the Kubernetes client, the runner (apps/sandbox-runner
 * as `npm run build` bundles it), its TCP listen mode and tokens, both
 * runners' roles, the files on the claim's volume, git (/usr/bin/git) over the
 * history volume.
 */

const IMAGE = `ghcr.io/aileron/sandbox-base:${VERSION}`;
const OLD_IMAGE = 'ghcr.io/aileron/sandbox-base:0.0.9';
/** an image that ignores the runner's arguments: its containers run, nothing ever listens */
const SILENT_IMAGE = 'registry.example.com/not-a-sandbox:1.0.0';
const UNPULLABLE = 'registry.example.com/does-not-exist:9.9.9';
const IDENTITY = ['-c', 'user.name=Aileron', '-c', 'user.email=snapshots@aileron.invalid'];

let scratch: string;
let images: Record<string, FakeImage>;
let fake: FakeKubernetes;
let kubelet: ProcessKubelet;
let driver: KubernetesSandboxDriver;
let ports: { sandbox: number; history: number };
let logLines: string[];
const drivers: KubernetesSandboxDriver[] = [];

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'k8s-sandboxes-'));
  const image = sandboxImageMaker(scratch);
  images = {
    [IMAGE]: image(VERSION),
    [OLD_IMAGE]: image('0.0.9'),
    [SILENT_IMAGE]: image(VERSION, ['/bin/sh', '-c', 'exec sleep 600']),
  };
  ports = await runnerPorts();
});

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

beforeEach(async () => {
  fake = await FakeKubernetes.start({ namespace: 'aileron-sandboxes' });
  kubelet = new ProcessKubelet(fake, {
    volumes: mkdtempSync(join(scratch, 'volumes-')),
    images,
    args: listenOnPodIP,
  });
  logLines = [];
  driver = aDriver();
});

afterEach(async () => {
  for (const each of drivers.splice(0)) await each.close();
  await kubelet.close();
  await fake.close();
  // whatever happened, no runner token reached the log
  for (const name of fake.names('secrets'))
    for (const token of Object.values(fake.secretValues(name)!)) expect(logLines.join('\n')).not.toContain(token);
});

function aDriver(overrides: Partial<KubernetesSandboxOptions> = {}): KubernetesSandboxDriver {
  const made = new KubernetesSandboxDriver({
    kubeConfig: fake.kubeConfig(),
    namespace: fake.namespace,
    ports,
    startTimeoutMs: 20_000,
    retryIntervalMs: 40,
    log: (line) => logLines.push(line),
    ...overrides,
  });
  drivers.push(made);
  return made;
}

function aSandbox(overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  return {
    id: randomUUID(),
    organizationId: randomUUID(),
    workspaceId: randomUUID(),
    name: `bugfix-${randomBytes(3).toString('hex')}`,
    network: 'none',
    limits: { memoryMb: 512 },
    ...overrides,
  };
}

const names = (spec: SandboxSpec) => {
  const stem = `sandbox-${spec.id}`;
  return {
    pod: stem,
    files: `${stem}-files`,
    history: `${stem}-history`,
    secret: `${stem}-runner`,
    networkPolicy: stem,
  };
};

function leftovers(): string[] {
  return [
    ...fake.names('pods'),
    ...fake.names('persistentvolumeclaims'),
    ...fake.names('secrets'),
    ...fake.names('networkpolicies'),
  ];
}

function posts(resource: string): number {
  return fake.requests.filter((r) => r.method === 'POST' && r.path.endsWith(`/${resource}`)).length;
}

async function startError(start: Promise<unknown>): Promise<SandboxStartError> {
  const error = await start.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SandboxStartError);
  return error as SandboxStartError;
}

/** A snapshot as the control plane takes one, through this file's driver. */
function snapshot(spec: SandboxSpec, message: string) {
  return takeSnapshot(driver, spec, {
    author: { name: 'Agent', email: 'agent@aileron.invalid' },
    message,
    at: new Date(),
    limits: { maxFiles: 10_000, maxBytes: 64 * 1024 * 1024 },
  });
}

function exec(command: string) {
  return { op: 'exec' as const, command, workdir: '.', timeoutMs: 20_000, limits: {} };
}

describe('Kubernetes sandbox driver', () => {
  it('runs a sandbox end to end: files and history on claims that outlive a stop, all of it gone after remove', async () => {
    const spec = aSandbox();
    const n = names(spec);
    await driver.create(spec);
    expect(fake.names('persistentvolumeclaims').sort()).toEqual([n.files, n.history].sort());
    expect(fake.names('pods')).toEqual([]);

    const runner = await driver.runner(spec);
    expect(fake.get('pods', n.pod).spec.containers[0].image).toBe(IMAGE);
    expect(await runner.call({ op: 'write', path: 'src/app.ts', content: 'export const answer = 41;\n' })).toEqual({
      bytes: 26,
      created: true,
    });
    const ran = await runner.call(exec('sed -i s/41/42/ src/app.ts && cat src/app.ts && id -u && pwd'));
    expect(ran).toMatchObject({ exitCode: 0, stdout: 'export const answer = 42;\n10001\n/src\n', timedOut: false });
    expect(await runner.call({ op: 'read', path: '/src/src/app.ts', offset: 0, limit: null })).toEqual({
      content: 'export const answer = 42;\n',
      lines: 1,
      totalLines: 1,
    });

    // the history, through the history container's runner, from what the agent's runner reports
    expect(await snapshot(spec, 'write: src/app.ts')).toMatchObject({ files: [{ path: 'src/app.ts', status: 'A' }] });
    expect(await snapshot(spec, 'nothing changed')).toBeNull();
    const log = await driver.git(spec, ['log', '--format=%s', SNAPSHOT_BRANCH]);
    expect(log.stdout.toString()).toBe('write: src/app.ts\n');
    const blob = await driver.git(spec, ['hash-object', '-w', '--stdin'], Buffer.from('hello\n'));
    expect(blob.stdout.toString().trim()).toBe(
      execFileSync('git', ['hash-object', '--stdin'], { input: 'hello\n', encoding: 'utf8' }).trim(),
    );
    // streamed: a bundle of the snapshots, which git on this machine reads back
    const bundle = join(scratch, `${spec.id}.bundle`);
    writeFileSync(bundle, await readAll(driver.gitStream(spec, ['bundle', 'create', '-', SNAPSHOT_BRANCH])));
    expect(execFileSync('git', ['bundle', 'list-heads', bundle], { encoding: 'utf8' })).toContain(
      `refs/heads/${SNAPSHOT_BRANCH}`,
    );
    const failed = driver.gitStream(spec, ['show', 'no-such-revision']);
    await expect(readAll(failed)).rejects.toThrow(/git show exited with code 128: fatal: .*no-such-revision/);

    // stop: the pod goes, the claims and what is on them stay
    const first = fake.get('pods', n.pod).metadata.uid;
    await driver.stop(spec);
    await runner.ended;
    expect(fake.get('pods', n.pod)).toBeUndefined();
    await expect(runner.call({ op: 'ping' })).rejects.toMatchObject({ failure: { code: 'SANDBOX_STOPPED' } });
    expect(fake.names('persistentvolumeclaims').sort()).toEqual([n.files, n.history].sort());
    expect(readFileSync(join(kubelet.volume(n.files), 'src/app.ts'), 'utf8')).toBe('export const answer = 42;\n');

    // a new pod over the same claims
    const again = await driver.runner(spec);
    expect(fake.get('pods', n.pod).metadata.uid).not.toBe(first);
    expect((await again.call({ op: 'readText', path: 'src/app.ts' })).content).toBe('export const answer = 42;\n');
    expect((await driver.git(spec, ['log', '--format=%s'])).stdout.toString()).toBe('write: src/app.ts\n');
    // a new runner knows no tree: it scans /src whole, and the history finds nothing new
    expect(await snapshot(spec, 'nothing changed')).toBeNull();

    await driver.remove(spec);
    expect(leftovers()).toEqual([]);
    expect(existsSync(kubelet.volume(n.files))).toBe(false);
    expect(existsSync(kubelet.volume(n.history))).toBe(false);
  });

  it('never snapshots the lost+found a new volume has at the root of /src, even once fsck has put something there', async () => {
    const spec = aSandbox();
    const runner = await driver.runner(spec);
    expect((await runner.call({ op: 'ls', path: '.', recursive: false })).entries.map((e) => e.path)).toEqual([
      'lost+found',
    ]);
    // what fsck recovers lands there, owned by whoever owned the inode
    writeFileSync(join(kubelet.volume(names(spec).files), 'lost+found', '#131074'), 'half a file\n');
    await runner.call({ op: 'write', path: 'app.ts', content: 'export {};\n' });
    // only the root's is left out: the agent's own lost+found deeper down is work like any other
    await runner.call({ op: 'write', path: 'docs/lost+found/notes.md', content: '# kept\n' });
    expect(await snapshot(spec, 'write: app.ts')).toMatchObject({
      files: [
        { path: 'app.ts', status: 'A' },
        { path: 'docs/lost+found/notes.md', status: 'A' },
      ],
    });
    expect((await driver.git(spec, ['ls-tree', '-r', '--name-only', SNAPSHOT_BRANCH])).stdout.toString()).toBe(
      'app.ts\ndocs/lost+found/notes.md\n',
    );
  });

  it('keeps the roles apart: the agent’s runner never runs git, the history’s nothing else, neither without its own token', async () => {
    const spec = aSandbox();
    const runner = await driver.runner(spec);
    const pod = fake.get('pods', names(spec).pod);
    const tokens = fake.secretValues(names(spec).secret)!;
    expect(Object.keys(tokens).sort()).toEqual(['history-token', 'sandbox-token']);
    const podIP = pod.status.podIP;

    expect(await talk(podIP, ports.sandbox, 'not-the-token', { op: 'ping' })).toEqual({
      id: -1,
      error: { code: 'UNAUTHORIZED', message: 'wrong token' },
    });
    // the agent's own token is the sandbox runner's, not the history's
    expect(await talk(podIP, ports.history, tokens['sandbox-token']!, { op: 'ping' })).toMatchObject({
      error: { code: 'UNAUTHORIZED' },
    });
    expect(await talk(podIP, ports.sandbox, tokens['sandbox-token']!, { op: 'git', args: ['log'] })).toMatchObject({
      error: { code: 'WRONG_ROLE' },
    });
    expect(await talk(podIP, ports.history, tokens['history-token']!, exec('id'))).toMatchObject({
      error: { code: 'WRONG_ROLE' },
    });
    expect(await talk(podIP, ports.history, tokens['history-token']!, { op: 'ping' })).toMatchObject({
      result: { version: VERSION, role: 'history' },
    });
    await expect(runner.call({ op: 'git', args: ['log'] } as never)).rejects.toBeInstanceOf(RunnerError);

    // what the agent runs sees no history and no history token, in its environment or any process's
    const look = await runner.call(exec('ls /history; cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n"'));
    expect(look.stderr).toMatch(/\/history.*No such file or directory/);
    // its own runner's token it may read (same user): it grants what the agent can do anyway
    expect(look.stdout).toContain(`AILERON_RUNNER_TOKEN=${tokens['sandbox-token']}`);
    expect(look.stdout).not.toContain(tokens['history-token']);
    expect((await runner.call(exec('env'))).stdout).not.toContain('AILERON_RUNNER_TOKEN');
  });

  it('creates objects the API server accepts, and a NetworkPolicy that follows the sandbox’s network', async () => {
    const spec = aSandbox();
    const n = names(spec);
    await driver.runner(spec);
    const pod = fake.get('pods', n.pod);
    expect(pod.metadata.labels).toMatchObject({
      'ai.aileron/sandbox': spec.id,
      'ai.aileron/workspace': spec.workspaceId,
    });
    const [sandbox, history] = pod.spec.containers;
    expect(sandbox.volumeMounts.map((m: { name: string }) => m.name)).not.toContain('history');
    expect(history.volumeMounts.map((m: { name: string }) => m.name)).not.toContain('files');
    expect(JSON.stringify(pod)).not.toContain(fake.secretValues(n.secret)!['history-token']);
    expect(fake.get('networkpolicies', n.networkPolicy).spec.egress).toEqual([]);

    // the network changes with the next start
    await driver.stop(spec);
    await driver.runner({ ...spec, network: 'egress' });
    const egress = JSON.stringify(fake.get('networkpolicies', n.networkPolicy).spec.egress);
    expect(egress).toContain('0.0.0.0/0');
    expect(egress).toContain('10.0.0.0/8');
    expect(
      fake.requests.filter((r) => r.method === 'PUT' && r.path.endsWith(`/networkpolicies/${n.networkPolicy}`)),
    ).toHaveLength(1);
  });

  it("runs a command under a client's policy in a pod of its own: /src read-only but for the writable roots, its own /tmp and TMPDIR, no egress; kept for the next such command, gone with the sandbox", async () => {
    const spec = aSandbox({ network: 'egress' });
    const runner = await driver.runner(spec);
    expect(await runner.call(exec('mkdir -p app/.git lib && echo keep > keep.txt && echo ok'))).toMatchObject({
      stdout: 'ok\n',
    });
    const restrictions = {
      writable: ['/src/app', '/src/keep.txt', '/src/missing', '/tmp/other', '/tmp/tmpdir'],
      network: false,
      tmpdir: '/tmp/tmpdir',
    };
    const podsBefore = posts('pods');
    const own = await driver.restricted(spec, restrictions);
    const refused = async (command: string) => refusedReadOnly(await own.call(exec(command)), command);
    const written = await own.call(exec('touch app/a && echo "$TMPDIR" && touch "$TMPDIR/t"'));
    expect(written).toMatchObject({ exitCode: 0, stdout: '/tmp/tmpdir\n' });
    // what the layout could not take is said on every command's stderr
    expectIgnoredRoots(written.stderr, [
      ['/src/keep.txt', 'it is not a directory in the sandbox'],
      ['/src/missing', 'it is not a directory in the sandbox'],
      ['/tmp/other', "on Kubernetes a command under a client's policy has a /tmp and home directory of its own, empty"],
    ]);
    await refused('touch b');
    await refused('echo changed > keep.txt');
    await refused('touch lib/c');
    await refused('touch app/.git/hooks-x');
    await refused('touch /tmp/x');
    // no home directory of its own: the image's (read-only, or absent as in this test's image)
    expect((await own.call(exec('touch ~/h'))).exitCode).not.toBe(0);
    // the sandbox's own runner sees what the command wrote
    expect((await runner.call(exec('ls app && cat keep.txt'))).stdout).toBe('a\nkeep\n');

    const pod = [...fake.names('pods')]
      .map((name) => fake.get('pods', name))
      .find((p) => p.metadata.labels['ai.aileron/restricted-of'] === spec.id);
    expect(pod.spec.containers.map((c: { name: string }) => c.name)).toEqual(['sandbox']);
    expect(pod.metadata.labels['ai.aileron/sandbox']).not.toBe(spec.id);
    expect(fake.get('networkpolicies', pod.metadata.name).spec.egress).toEqual([]);
    expect(JSON.stringify(fake.get('networkpolicies', names(spec).networkPolicy).spec.egress)).toContain('0.0.0.0/0');
    expect(JSON.stringify(pod)).not.toContain(fake.secretValues(names(spec).secret)!['sandbox-token']);

    // the next command under the same policy uses the same pod; another policy gets one of its own
    await driver.restricted(spec, restrictions);
    expect(posts('pods')).toBe(podsBefore + 1);
    const networked = await driver.restricted(spec, { network: true });
    expect(await networked.call(exec('touch anywhere && echo ok'))).toMatchObject({ exitCode: 0, stdout: 'ok\n' });
    expect(posts('pods')).toBe(podsBefore + 2);
    const restrictedPods = () =>
      fake
        .names('pods')
        .filter((name) => fake.get('pods', name).metadata.labels['ai.aileron/restricted-of'] === spec.id);
    expect(restrictedPods()).toHaveLength(2);

    await driver.stop(spec);
    expect(restrictedPods()).toEqual([]);
    expect(fake.names('networkpolicies')).toEqual([names(spec).networkPolicy]);
    await driver.remove(spec);
    expect(leftovers()).toEqual([]);
  });

  it('starts a sandbox once however many ask at the same time', async () => {
    const spec = aSandbox();
    const [a, b, c] = await Promise.all([driver.runner(spec), driver.runner(spec), driver.runner(spec)]);
    expect(a).toBe(b);
    expect(b).toBe(c);
    expect(posts('pods')).toBe(1);
  });

  it('leaves pods running when it closes, and a new driver (a restarted control plane) reconnects to them with the Secret’s tokens', async () => {
    const spec = aSandbox();
    const runner = await driver.runner(spec);
    const uid = fake.get('pods', names(spec).pod).metadata.uid;
    const background = await runner.call(exec('sleep 300 >/dev/null 2>&1 & echo $!'));
    const pid = background.stdout.trim();
    await driver.close();
    await runner.ended;
    expect(fake.get('pods', names(spec).pod).metadata.uid).toBe(uid);

    const restarted = aDriver();
    const again = await restarted.runner(spec);
    expect(fake.get('pods', names(spec).pod).metadata.uid).toBe(uid);
    expect(posts('pods')).toBe(1);
    expect(
      fake.requests.filter((r) => r.method === 'GET' && r.path.endsWith(`/secrets/${names(spec).secret}`)),
    ).toHaveLength(1);
    // the agent's command still runs
    expect((await again.call(exec(`kill -0 ${pid} && echo alive`))).stdout).toBe('alive\n');
  });

  it('ends the runner when a container of the pod dies, and starts a whole new pod on the next call', async () => {
    const spec = aSandbox();
    const runner = await driver.runner(spec);
    await runner.call({ op: 'write', path: 'kept.txt', content: 'still here\n' });
    const uid = fake.get('pods', names(spec).pod).metadata.uid;
    // the connection to the killed runner closes before the pod's watch tells why it ended (held back
    // here, as a slow API server does): the driver must still hear it, say why and delete the pod
    fake.stallWatches();
    kubelet.process(names(spec).pod, 'history')!.kill('SIGKILL');
    await runner.ended;
    fake.endWatches();
    await eventually('the log line saying why the pod ended', () =>
      expect(logLines).toContainEqual(
        expect.stringMatching(/ended: pod Running: container history: (exited with code 137|Error)/),
      ),
    );

    const again = await driver.runner(spec);
    expect(fake.get('pods', names(spec).pod).metadata.uid).not.toBe(uid);
    expect((await again.call({ op: 'readText', path: 'kept.txt' })).content).toBe('still here\n');
  });

  describe('a tar.gz source', () => {
    /** The archive as a file of the control plane's, where the upload leaves it. */
    function archive(entries: TarEntry[]): string {
      const file = join(scratch, `${randomUUID()}.tar.gz`);
      writeFileSync(file, gzipSync(tar(entries)));
      return file;
    }

    async function importError(spec: SandboxSpec, file: string): Promise<string> {
      const error = await importSource(driver, spec, 'tar.gz', file).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(SandboxSourceError);
      return (error as Error).message;
    }

    it('is unpacked into /src inside the sandbox: files, directories, modes and links as the archive has them', async () => {
      const spec = aSandbox();
      await importSource(
        driver,
        spec,
        'tar.gz',
        archive([
          { name: 'repo/', type: 'dir' },
          { name: 'repo/README.md', content: '# a repository\n' },
          { name: 'repo/bin/test.sh', content: '#!/bin/sh\necho ok\n', mode: 0o755 },
          { name: 'repo/docs', type: 'symlink', target: 'README.md' },
          // a link to the system's files resolves in the container, as any link the agent makes
          { name: 'repo/etc', type: 'symlink', target: '/etc' },
          { name: 'repo/big.bin', content: Buffer.alloc(3 * 1024 * 1024, 7) },
        ]),
      );
      const runner = await driver.runner(spec);
      expect((await runner.call({ op: 'readText', path: 'repo/README.md' })).content).toBe('# a repository\n');
      expect(
        await runner.call(
          exec(
            'repo/bin/test.sh && readlink repo/docs repo/etc && stat -c %s repo/big.bin && stat -c %u:%a repo/bin/test.sh',
          ),
        ),
      ).toMatchObject({
        exitCode: 0,
        stdout: 'ok\nREADME.md\n/etc\n3145728\n10001:755\n',
      });
      expect(await snapshot(spec, 'write: source upload (tar.gz)')).not.toBeNull();
      expect((await driver.git(spec, ['ls-tree', '-r', SNAPSHOT_BRANCH])).stdout.toString()).toMatch(
        /^100644 blob \S+\trepo\/README.md\n100644 blob \S+\trepo\/big.bin\n100755 blob \S+\trepo\/bin\/test.sh\n120000 blob \S+\trepo\/docs\n120000 blob \S+\trepo\/etc\n$/,
      );
    });

    it('never writes outside /src: .. is refused, a leading / dropped, nothing written through a link', async () => {
      const spec = aSandbox();
      // /tmp is the container's own, writable: where an escape would land
      expect(await importError(spec, archive([{ name: '../tmp/planted.txt', content: 'escaped\n' }]))).toMatch(
        /Member name contains '\.\.'/,
      );
      await importSource(driver, spec, 'tar.gz', archive([{ name: '/tmp/absolute.txt', content: 'kept in /src\n' }]));
      // the link is a placeholder file until the end: the member below it has no directory to go to
      expect(
        await importError(
          spec,
          archive([
            { name: 'out', type: 'symlink', target: '/tmp' },
            { name: 'out/through.txt', content: 'through the link\n' },
          ]),
        ),
      ).toMatch(/out\/through.txt: Cannot open: Not a directory/);
      const runner = await driver.runner(spec);
      expect((await runner.call(exec('ls -A /tmp; cat tmp/absolute.txt'))).stdout).toBe('kept in /src\n');
    });

    it('is refused when it unpacks to more than the files claim holds, or is not gzip at all', async () => {
      const spec = aSandbox();
      const small = aDriver({ storage: { files: '1Mi' } });
      // 4 MiB of zeros: a few KiB compressed, well under any upload limit
      const bomb = archive([{ name: 'zeros.bin', content: Buffer.alloc(4 * 1024 * 1024) }]);
      const error = await importSource(small, spec, 'tar.gz', bomb).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(SandboxSourceError);
      expect((error as Error).message).toBe(
        'the archive could not be unpacked: the archive unpacks to more than 1048576 bytes, what /src holds',
      );
      const notGzip = join(scratch, 'not.tar.gz');
      writeFileSync(notGzip, tar([{ name: 'plain.txt', content: 'not compressed\n' }]));
      expect(await importError(aSandbox(), notGzip)).toMatch(/not a gzip-compressed archive/);
    });
  });

  describe('a git bundle source', () => {
    /** A developer's repository of two commits on `main`, as `git bundle create` writes it. */
    function twoCommitBundle(): { file: string; commits: string[] } {
      const repo = mkdtempSync(join(scratch, 'repo-'));
      const git = (...args: string[]) =>
        execFileSync('git', ['-C', repo, ...IDENTITY, ...args], {
          encoding: 'utf8',
          env: { PATH: process.env.PATH, HOME: repo, GIT_CONFIG_NOSYSTEM: '1' },
        });
      git('init', '-q', '-b', 'main');
      writeFileSync(join(repo, 'math.js'), 'exports.add = (a, b) => a - b;\n');
      writeFileSync(
        join(repo, 'test.sh'),
        '#!/bin/sh\nnode -e "process.exit(require(\'./math\').add(2, 3) === 5 ? 0 : 1)"\n',
        { mode: 0o755 },
      );
      git('add', '-A');
      git('commit', '-q', '-m', 'first');
      // what `git archive` would leave out or rewrite if the bundle's own attributes applied
      writeFileSync(join(repo, '.gitattributes'), 'ci.yml export-ignore\nVERSION export-subst\n');
      writeFileSync(join(repo, 'ci.yml'), 'on: push\n');
      writeFileSync(join(repo, 'VERSION'), '$Format:%H$\n');
      execFileSync('ln', ['-s', 'math.js', join(repo, 'index.js')]);
      git('add', '-A');
      git('commit', '-q', '-m', 'second');
      const file = join(scratch, `${randomUUID()}.bundle`);
      git('bundle', 'create', '-q', file, 'HEAD', 'main');
      return { file, commits: git('log', '--format=%H %s', 'main').trim().split('\n') };
    }

    async function importError(on: KubernetesSandboxDriver, spec: SandboxSpec, file: string): Promise<string> {
      const error = await importSource(on, spec, 'git-bundle', file).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(SandboxSourceError);
      return (error as Error).message;
    }

    async function refs(spec: SandboxSpec): Promise<string> {
      return (await driver.git(spec, ['for-each-ref', '--format=%(refname)'])).stdout.toString();
    }

    /** The files the history container keeps in its own /tmp (git lists a directory as a work tree); a bundle is removed once its connection closed. */
    async function keptInScratch(spec: SandboxSpec): Promise<string> {
      return (await driver.git(spec, ['--work-tree=/tmp', 'ls-files', '--others'])).stdout.toString();
    }

    it('imports its commits into the snapshot branch, its files into /src through the agent’s runner, and the next change is a commit on top', async () => {
      const spec = aSandbox();
      const { file, commits } = twoCommitBundle();
      await importSource(driver, spec, 'git-bundle', file);

      expect(
        (await driver.git(spec, ['log', '--format=%H %s', SNAPSHOT_BRANCH])).stdout.toString().trim().split('\n'),
      ).toEqual(commits);
      const runner = await driver.runner(spec);
      expect((await runner.call({ op: 'readText', path: 'math.js' })).content).toBe('exports.add = (a, b) => a - b;\n');
      // every file as committed: the bundle's export-ignore and export-subst do not apply, the mode and the link are kept
      expect(
        await runner.call(exec('cat ci.yml VERSION; readlink index.js; stat -c %u:%A test.sh; ls -A')),
      ).toMatchObject({
        exitCode: 0,
        stdout:
          'on: push\n$Format:%H$\nmath.js\n10001:-rwxr-xr-x\n.gitattributes\nVERSION\nci.yml\nindex.js\nlost+found\nmath.js\ntest.sh\n',
      });
      // /src is the bundle's HEAD exactly: a snapshot finds nothing to commit
      expect(await snapshot(spec, 'nothing changed')).toBeNull();
      // the bundle was kept only while git read it
      await expect.poll(() => keptInScratch(spec)).toBe('');

      // the agent fixes the bug: the snapshot is that change alone, on top of the bundle's HEAD
      await runner.call({ op: 'write', path: 'math.js', content: 'exports.add = (a, b) => a + b;\n' });
      expect((await runner.call(exec('./test.sh'))).exitCode).toBe(0);
      expect(await snapshot(spec, 'write: math.js')).toMatchObject({ files: [{ path: 'math.js', status: 'M' }] });
      expect((await driver.git(spec, ['log', '--format=%s', SNAPSHOT_BRANCH])).stdout.toString()).toBe(
        'write: math.js\nsecond\nfirst\n',
      );
      expect((await driver.git(spec, ['rev-parse', `${SNAPSHOT_BRANCH}^`])).stdout.toString().trim()).toBe(
        commits[0]!.split(' ')[0],
      );
      expect(
        (
          await driver.git(spec, ['diff-tree', '--no-commit-id', '--name-status', '-r', SNAPSHOT_BRANCH])
        ).stdout.toString(),
      ).toBe('M\tmath.js\n');
    });

    it('is refused, changing nothing, when git cannot read it; a good bundle then imports', async () => {
      const spec = aSandbox();
      const { file, commits } = twoCommitBundle();
      const whole = readFileSync(file);
      const truncated = join(scratch, 'truncated.bundle');
      // its header and refs intact, its pack cut short
      writeFileSync(truncated, whole.subarray(0, whole.length - 200));
      expect(await importError(driver, spec, truncated)).toMatch(/^the bundle could not be read: (fatal|error): /);
      const garbage = join(scratch, 'garbage.bundle');
      writeFileSync(garbage, 'not a bundle at all\n');
      expect(await importError(driver, spec, garbage)).toMatch(/^not a git bundle: /);

      expect(await refs(spec)).toBe('');
      await expect.poll(() => keptInScratch(spec)).toBe('');
      const runner = await driver.runner(spec);
      expect((await runner.call({ op: 'ls', path: '.', recursive: false })).entries.map((e) => e.path)).toEqual([
        'lost+found',
      ]);

      await importSource(driver, spec, 'git-bundle', file);
      expect(
        (await driver.git(spec, ['log', '--format=%H %s', SNAPSHOT_BRANCH])).stdout.toString().trim().split('\n'),
      ).toEqual(commits);
    });

    it('holds to the size limits: the bundle within the history container’s scratch space, its tree within the files claim', async () => {
      const spec = aSandbox();
      const repo = mkdtempSync(join(scratch, 'repo-'));
      const git = (...args: string[]) =>
        execFileSync('git', ['-C', repo, ...IDENTITY, ...args], {
          env: { PATH: process.env.PATH, HOME: repo, GIT_CONFIG_NOSYSTEM: '1' },
        });
      git('init', '-q', '-b', 'main');
      // 4 MiB of zeros: a bundle of a few KiB
      writeFileSync(join(repo, 'zeros.bin'), Buffer.alloc(4 * 1024 * 1024));
      git('add', '-A');
      git('commit', '-q', '-m', 'zeros');
      const small = join(scratch, `${randomUUID()}.bundle`);
      git('bundle', 'create', '-q', small, 'main');
      // 256 KiB that do not compress: a bundle larger than that
      writeFileSync(join(repo, 'noise.bin'), randomBytes(256 * 1024));
      git('add', '-A');
      git('commit', '-q', '-m', 'noise');
      const large = join(scratch, `${randomUUID()}.bundle`);
      git('bundle', 'create', '-q', large, 'main');

      expect(await importError(aDriver({ scratchSize: '128Ki' }), spec, large)).toBe(
        `the file could not be passed to git: the file is larger than ${128 * 1024} bytes, what the history container's scratch space holds`,
      );
      expect(await refs(spec)).toBe('');
      await expect.poll(() => keptInScratch(spec)).toBe('');

      const other = aSandbox();
      const tight = aDriver({ storage: { files: '1Mi' } });
      expect(await importError(tight, other, small)).toBe(
        'the archive could not be unpacked: the archive unpacks to more than 1048576 bytes, what /src holds',
      );
      // no snapshot of a tree that is not there
      expect((await tight.git(other, ['rev-parse', '--verify', '--quiet', SNAPSHOT_BRANCH])).code).not.toBe(0);
    });
  });

  describe('refusing a runner of another version', () => {
    it('stops a pod an older control plane left running and names both versions; the next start runs our image', async () => {
      const spec = aSandbox();
      const older = aDriver({ image: OLD_IMAGE, version: '0.0.9' });
      const old = await older.runner(spec);
      await old.call({ op: 'write', path: 'notes.md', content: 'from before the upgrade\n' });
      await older.close();

      const error = await startError(driver.runner(spec));
      expect(error.message).toContain(`its runner is version 0.0.9 but this control plane is ${VERSION}`);
      expect(fake.get('pods', names(spec).pod)).toBeUndefined();
      expect(fake.names('persistentvolumeclaims')).toHaveLength(2);

      const runner = await driver.runner(spec);
      expect(fake.get('pods', names(spec).pod).spec.containers[0].image).toBe(IMAGE);
      expect((await runner.call({ op: 'readText', path: 'notes.md' })).content).toBe('from before the upgrade\n');
    });

    it('only warns with versionMismatch: warn', async () => {
      const spec = aSandbox();
      const lenient = aDriver({ image: OLD_IMAGE, versionMismatch: 'warn' });
      const runner = await lenient.runner(spec);
      expect(await runner.call({ op: 'ping' })).toMatchObject({ version: '0.0.9' });
      expect(logLines).toContainEqual(
        expect.stringContaining(`runs runner version 0.0.9, this control plane ${VERSION}; using it anyway`),
      );
    });
  });

  describe('pods that do not start', () => {
    it('fails a pod that never becomes ready within the timeout, saying why, and deletes it', async () => {
      const spec = aSandbox();
      const impatient = aDriver({ image: SILENT_IMAGE, startTimeoutMs: 1500 });
      const began = Date.now();
      const error = await startError(impatient.runner(spec));
      expect(error.message).toBe(
        `sandbox ${spec.name} did not start: not ready within 2 s (Running, readiness probe not passing)`,
      );
      expect(Date.now() - began).toBeLessThan(10_000);
      expect(fake.get('pods', names(spec).pod)).toBeUndefined();
      // its storage stays for the next try
      expect(fake.names('persistentvolumeclaims')).toHaveLength(2);
    });

    it('fails at once with the kubelet’s reason when the image cannot be pulled', async () => {
      const spec = aSandbox();
      const began = Date.now();
      const error = await startError(aDriver({ image: UNPULLABLE }).runner(spec));
      expect(error.message).toContain(`ImagePullBackOff: Back-off pulling image "${UNPULLABLE}"`);
      expect(Date.now() - began).toBeLessThan(10_000);
      expect(fake.get('pods', names(spec).pod)).toBeUndefined();
    });

    it('turns an RBAC refusal into a clear error', async () => {
      fake.refuse({
        verb: 'create',
        resource: 'persistentvolumeclaims',
        code: 403,
        reason: 'Forbidden',
        message:
          'persistentvolumeclaims is forbidden: User "system:serviceaccount:aileron:control-plane" cannot create resource "persistentvolumeclaims"',
      });
      const error = await startError(driver.runner(aSandbox()));
      expect(error.message).toMatch(
        /could not create the claim sandbox-.*-files in namespace "aileron-sandboxes": Kubernetes answered 403 Forbidden: persistentvolumeclaims is forbidden/,
      );
      expect(fake.names('pods')).toEqual([]);
    });
  });
});

/** One request on a fresh connection to a runner, as anyone who reaches its port could send it; the first answer. */
function talk(host: string, port: number, token: string, request: object): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let buffered = '';
    socket.setEncoding('utf8');
    socket.on('data', (data: string) => {
      buffered += data;
      const end = buffered.indexOf('\n');
      if (end < 0) return;
      socket.destroy();
      resolve(JSON.parse(buffered.slice(0, end)));
    });
    socket.on('error', reject);
    socket.write(`${token}\n${JSON.stringify({ ...request, id: 1 })}\n`);
  });
}

function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.once('end', () => resolve(Buffer.concat(chunks)));
    stream.once('error', reject);
  });
}

interface TarEntry {
  name: string;
  type?: 'file' | 'dir' | 'symlink';
  content?: string | Buffer;
  target?: string;
  mode?: number;
}

/** A ustar archive, byte by byte: names as given, which tar programs would not write (`..`, absolute). */
function tar(entries: TarEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    const content = Buffer.from(entry.content ?? '');
    const header = Buffer.alloc(512);
    const field = (value: string, at: number, length: number) => header.write(value, at, length, 'utf8');
    const octal = (value: number, at: number, length: number) =>
      field(`${value.toString(8).padStart(length - 1, '0')}\0`, at, length);
    field(entry.name, 0, 100);
    octal(entry.mode ?? (entry.type === 'dir' ? 0o755 : 0o644), 100, 8);
    octal(0, 108, 8);
    octal(0, 116, 8);
    octal(entry.type === 'file' || entry.type === undefined ? content.length : 0, 124, 12);
    octal(Math.floor(Date.now() / 1000), 136, 12);
    field('        ', 148, 8);
    field(entry.type === 'dir' ? '5' : entry.type === 'symlink' ? '2' : '0', 156, 1);
    field(entry.target ?? '', 157, 100);
    field('ustar\u000000', 257, 8);
    let sum = 0;
    for (const byte of header) sum += byte;
    field(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
    blocks.push(header);
    if (content.length > 0 && (entry.type ?? 'file') === 'file')
      blocks.push(content, Buffer.alloc((512 - (content.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}
