import { randomBytes } from 'node:crypto';
import { createReadStream, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { projectRoot } from '@aileron/config';
import {
  apiRequestOptions,
  deleteIgnoringAbsent,
  describeApiError,
  exitReason,
  hasEnded,
  isApiStatus,
  PodNotReady,
  type PodWatch,
  watchDriverPods,
} from '@aileron/kubernetes';
import {
  CoreV1Api,
  NetworkingV1Api,
  type ConfigurationOptions,
  type KubeConfig,
  type V1Pod,
} from '@kubernetes/client-node';
import { posix } from 'node:path';
import {
  HISTORY_DIR,
  type RunnerOp,
  type RunnerRequest,
  type RunnerResult,
  SANDBOX_WORKDIR,
} from '../../runner-protocol';
import {
  type CommandRestrictions,
  type GitResult,
  RunnerError,
  type SandboxDriver,
  type SandboxRunner,
  type SandboxSpec,
  SandboxSourceError,
  SandboxStartError,
} from '../driver';
import { SNAPSHOT_BRANCH } from '../local-sandbox-driver';
import {
  DEFAULT_PORTS,
  RESTRICTED_OF_LABEL,
  type RestrictedLayout,
  restrictedNames,
  restrictedNetworkPolicyManifest,
  restrictedPodManifest,
  SANDBOX_SELECTOR,
  sandboxManifests,
  sandboxNames,
  TOKEN_KEYS,
  type RunnerTokens,
  type SandboxManifestOptions,
} from './manifests';
import { RunnerConnection, type RunnerAddress } from './runner-connection';
import { quantityBytes } from '../../domain/quantity';

export interface KubernetesSandboxOptions {
  /** built by the caller: `loadFromCluster()` in a pod, else `loadFromDefault()` */
  kubeConfig: KubeConfig;
  /** where sandboxes' Pods, claims, Secrets and NetworkPolicies live */
  namespace: string;
  /** this control plane's version, which every runner must report (default: package.json's) */
  version?: string;
  /** the sandbox image (default `ghcr.io/aileron/sandbox-base:<version>`) */
  image?: string;
  /**
   * A pod whose runner reports another version than `version` (left running
   * by an older control plane, or an image built from other sources):
   * `refuse` (default) stops it and fails the start; `warn` logs and uses it.
   */
  versionMismatch?: 'refuse' | 'warn';
  /** the runners' ports in the pod (default 7070 and 7071) */
  ports?: { sandbox: number; history: number };
  /** claim sizes (default 10Gi files, 2Gi history) and storage class (default: the cluster's) */
  storage?: { files?: string; history?: string; storageClassName?: string };
  /** the agent's container: cpu (default 1) and memory when the sandbox's limits name none (default 2Gi) */
  sandboxResources?: { cpu?: string; memory?: string };
  /** the history container (default 250m, 256Mi) */
  historyResources?: { cpu?: string; memory?: string };
  /** each scratch directory's size limit (default 1Gi) */
  scratchSize?: string;
  /** the control plane's namespace when it is not `namespace`: its pods alone may connect */
  controlPlaneNamespace?: string;
  /** private ranges an `egress` sandbox may reach besides the public internet and cluster DNS */
  egressAllowCidrs?: string[];
  /** public ranges it must not reach besides the private ones, e.g. the cluster's global IPv6 pod range */
  egressExceptCidrs?: string[];
  /** from the first API call until both runners answer (default 120 s: an image pull and a volume to provision) */
  startTimeoutMs?: number;
  /** bound on each API request (default 10 s) */
  requestTimeoutMs?: number;
  /** how long to wait before asking again: a failed watch, a pod still terminating (default 1 s) */
  retryIntervalMs?: number;
  /** one line per event; never a token */
  log: (line: string) => void;
}

const DELETE_GRACE_SECONDS = 10;
/** After the grace period the kubelet kills; this covers a slow kubelet before a stop gives up waiting. */
const GONE_TIMEOUT_MS = (DELETE_GRACE_SECONDS + 30) * 1000;

/**
 * Sandboxes as Pods (manifests.ts: two containers, the agent's and the
 * history's, over two PersistentVolumeClaims), reached at the pod's IP by
 * their runners' TCP listen mode with per-container bearer tokens.
 *
 * - `create` makes the claims, the Secret and the NetworkPolicy;
 * - `runner` starts the Pod if it is not running (the claims keep the files
 *   and the history), waits for it to be Ready (one watch on the sandboxes'
 *   pods, as the pool's driver), connects to both runners and checks their
 *   version, and initialises the history (`git init`, which is idempotent);
 * - `git`/`gitStream` run in the history container, starting the Pod first
 *   if need be. Its work tree is mounted read-only there, so git commands that
 *   write files into /src (checkout, reset --hard) fail: change files through
 *   the runner;
 * - a source's bytes are streamed to the runners (`unpack` to the agent's,
 *   `receive` to the history's), never read from the control plane's disk in
 *   the pod;
 * - `stop` deletes the Pod (idle), `remove` everything.
 *
 * The control plane's service account needs, in `namespace`: pods (create,
 * get, list, watch, delete), persistentvolumeclaims (create, delete), secrets
 * (create, get, delete), networking.k8s.io networkpolicies (create, update,
 * delete). Unlike the pool's, it reads Secrets back: a restarted control
 * plane finds the runners' tokens there.
 */
export class KubernetesSandboxDriver implements SandboxDriver {
  readonly kind = 'kubernetes' as const;
  /**
   * A restricted pod cannot narrow one command inside itself (no capability,
   * no user namespace): a client's tighter bounds get a pod of their own,
   * whose mounts and NetworkPolicy are chosen when it starts (restricted()).
   */
  readonly narrowing = 'restricted' as const;
  readonly version: string;
  private readonly core: CoreV1Api;
  private readonly networking: NetworkingV1Api;
  private readonly namespace: string;
  private readonly manifestOptions: SandboxManifestOptions;
  private readonly versionMismatch: 'refuse' | 'warn';
  private readonly startTimeoutMs: number;
  private readonly requestTimeoutMs: number;
  private readonly retryIntervalMs: number;
  private readonly log: (line: string) => void;
  private readonly pods: PodWatch;
  /** each sandbox's pod runner, starting or running */
  private readonly podRunners = new Map<string, Promise<PodRunner>>();
  /** the runners' tokens of each sandbox seen, as its Secret holds them */
  private readonly tokens = new Map<string, RunnerTokens>();
  /** by `<sandbox id>/<layout key>`: the restricted runners started, kept until their sandbox stops */
  private readonly restrictedRunners = new Map<string, Promise<RestrictedRunner>>();
  /** the starts under way, which close() aborts */
  private readonly starts = new Set<AbortController>();
  /** by pod name, the watch on the pod a runner was started in, kept until the pod's end is seen (see follow) */
  private readonly following = new Map<string, () => void>();
  private closed = false;

  constructor(options: KubernetesSandboxOptions) {
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.networking = options.kubeConfig.makeApiClient(NetworkingV1Api);
    this.namespace = options.namespace;
    this.version = options.version ?? packageVersion();
    this.versionMismatch = options.versionMismatch ?? 'refuse';
    this.startTimeoutMs = options.startTimeoutMs ?? 120_000;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
    this.retryIntervalMs = options.retryIntervalMs ?? 1000;
    this.log = options.log;
    this.manifestOptions = {
      namespace: options.namespace,
      image: options.image ?? `ghcr.io/aileron/sandbox-base:${this.version}`,
      ports: options.ports ?? { ...DEFAULT_PORTS },
      storage: {
        files: options.storage?.files ?? '10Gi',
        history: options.storage?.history ?? '2Gi',
        ...(options.storage?.storageClassName ? { storageClassName: options.storage.storageClassName } : {}),
      },
      sandboxResources: {
        cpu: options.sandboxResources?.cpu ?? '1',
        memory: options.sandboxResources?.memory ?? '2Gi',
      },
      historyResources: {
        cpu: options.historyResources?.cpu ?? '250m',
        memory: options.historyResources?.memory ?? '256Mi',
      },
      scratchSize: options.scratchSize ?? '1Gi',
      ...(options.controlPlaneNamespace ? { controlPlaneNamespace: options.controlPlaneNamespace } : {}),
      ...(options.egressAllowCidrs ? { egressAllowCidrs: options.egressAllowCidrs } : {}),
      ...(options.egressExceptCidrs ? { egressExceptCidrs: options.egressExceptCidrs } : {}),
    };
    this.pods = watchDriverPods({
      who: 'kubernetes sandboxes',
      kubeConfig: options.kubeConfig,
      core: this.core,
      namespace: this.namespace,
      labelSelector: SANDBOX_SELECTOR,
      requestTimeoutMs: this.requestTimeoutMs,
      retryIntervalMs: this.retryIntervalMs,
      log: this.log,
    });
  }

  async create(spec: SandboxSpec): Promise<void> {
    if (this.closed) throw new SandboxStartError('the Kubernetes sandbox driver is shut down');
    const abort = new AbortController();
    this.starts.add(abort);
    try {
      await this.runnerTokens(spec, abort.signal);
      await this.ensureStorage(spec, abort.signal);
    } catch (error) {
      throw new SandboxStartError(`sandbox ${spec.name} could not be created: ${reasonOf(error)}`);
    } finally {
      this.starts.delete(abort);
    }
  }

  runner(spec: SandboxSpec): Promise<SandboxRunner> {
    return this.podRunner(spec);
  }

  async git(spec: SandboxSpec, args: string[], input?: Buffer | NodeJS.ReadableStream): Promise<GitResult> {
    // the whole input in one request: what the control plane feeds git (a patch, an object) is small next to a bundle
    const stdin = input === undefined || Buffer.isBuffer(input) ? input : await collect(input);
    const podRunner = await this.podRunner(spec);
    const result = await podRunner.history.call({
      op: 'git',
      args,
      ...(stdin ? { stdin: stdin.toString('base64') } : {}),
    });
    return { stdout: Buffer.from(result.stdout, 'base64'), stderr: result.stderr, code: result.code };
  }

  /**
   * On a connection of its own, so that a slow reader holds back only this
   * git. A git that fails ends the stream with an error (its stderr) rather
   * than a short output that looks whole.
   */
  gitStream(spec: SandboxSpec, args: string[]): NodeJS.ReadableStream {
    const out = new PassThrough();
    void (async () => {
      const podRunner = await this.podRunner(spec);
      const connection = await RunnerConnection.open(podRunner.address('history'), this.requestTimeoutMs);
      out.once('close', () => connection.close());
      try {
        const result = await connection.stream({ op: 'git', args }, out);
        if (result.code === 0) out.end();
        else out.destroy(new Error(`git ${args[0] ?? ''} exited with code ${result.code}: ${result.stderr.trim()}`));
      } finally {
        connection.close();
      }
    })().catch((error: unknown) => out.destroy(error instanceof Error ? error : new Error(String(error))));
    return out;
  }

  /**
   * Streams the archive to the agent's runner, on a connection of its own,
   * and GNU tar unpacks it there, inside the sandbox's container, as the
   * local driver's does inside bubblewrap: a member's path or link can only
   * land in the sandbox's own filesystem, and tar keeps them in /src (see
   * the runner's unpack). At most what the files claim holds.
   */
  async unpack(spec: SandboxSpec, archive: NodeJS.ReadableStream, options: { gzip: boolean }): Promise<void> {
    await this.upload(
      spec,
      'sandbox',
      { op: 'unpack', maxBytes: quantityBytes(this.manifestOptions.storage.files), gzip: options.gzip },
      archive,
      'the archive could not be unpacked',
      async () => undefined,
    );
  }

  /**
   * Streams the file to the history runner, which keeps it in its own
   * scratch space (at most what that holds) while the connection that sent
   * it stays open: git there reads it by the path the runner answers.
   */
  async withFileForGit<T>(spec: SandboxSpec, file: string, use: (path: string) => Promise<T>): Promise<T> {
    return this.upload(
      spec,
      'history',
      { op: 'receive', maxBytes: quantityBytes(this.manifestOptions.scratchSize) },
      createReadStream(file),
      'the file could not be passed to git',
      (received) => use(received.path),
    );
  }

  /** A request with an input, on a connection of its own that stays open until `then` is done; a refusal of the runner's is a SandboxSourceError. */
  private async upload<O extends 'unpack' | 'receive', T>(
    spec: SandboxSpec,
    role: 'sandbox' | 'history',
    request: Extract<RunnerRequest, { op: O }>,
    input: NodeJS.ReadableStream,
    failed: string,
    then: (result: RunnerResult<O>) => Promise<T>,
  ): Promise<T> {
    const podRunner = await this.podRunner(spec);
    const connection = await RunnerConnection.open(podRunner.address(role), this.requestTimeoutMs);
    try {
      let result: RunnerResult<O>;
      try {
        result = await connection.upload(request, input);
      } catch (error) {
        if (error instanceof RunnerError) throw new SandboxSourceError(`${failed}: ${error.message}`);
        throw error;
      }
      return await then(result);
    } finally {
      connection.close();
    }
  }

  /**
   * A runner for commands under a client's tighter bounds, in a pod of its
   * own beside the sandbox's: /src read-only but for the writable roots the
   * sandbox's runner finds there as directories (each mounted again from the
   * files claim), /tmp, TMPDIR and the home directory its own and writable
   * only where the policy says, and egress only where the sandbox has it and
   * the policy keeps it (its own NetworkPolicy). One pod per sandbox and
   * layout, reused by every such command until the sandbox stops. What it
   * cannot give: the sandbox's /tmp, home directory and processes (its own
   * are empty), a writable root under /tmp other than /tmp and TMPDIR, or a
   * root the sandbox's runner does not list as a directory.
   */
  async restricted(spec: SandboxSpec, restrictions: CommandRestrictions): Promise<SandboxRunner> {
    const main = await this.podRunner(spec);
    const { layout, notes } = await layoutOf(main, restrictions);
    const names = restrictedNames(spec.id, layout);
    const id = `${spec.id}/${names.key}`;
    let pending = this.restrictedRunners.get(id);
    if (!pending) {
      pending = this.startRestricted(spec, layout);
      this.restrictedRunners.set(id, pending);
      const forget = (): void => {
        if (this.restrictedRunners.get(id) === pending) this.restrictedRunners.delete(id);
      };
      pending.then((runner) => void runner.ended.then(forget), forget);
    }
    const runner = await pending;
    return runner.withNotes(notes, layout.tmpdir);
  }

  private async startRestricted(spec: SandboxSpec, layout: RestrictedLayout): Promise<RestrictedRunner> {
    const abort = new AbortController();
    this.starts.add(abort);
    const signal = abort.signal;
    const names = restrictedNames(spec.id, layout);
    const where = `sandbox ${spec.name} (restricted pod ${this.namespace}/${names.pod})`;
    const deadline = performance.now() + this.startTimeoutMs;
    try {
      const tokens = await this.runnerTokens(spec, signal);
      await this.api(
        `create the restricted runner's NetworkPolicy`,
        signal,
        () =>
          this.networking.createNamespacedNetworkPolicy(
            { namespace: this.namespace, body: restrictedNetworkPolicyManifest(spec, layout, this.manifestOptions) },
            this.requestOptions(signal),
          ),
        { exists: 'fine' },
      );
      this.pods.start();
      let pod = await this.readPod(names.pod, signal);
      if (pod && (pod.metadata?.deletionTimestamp || hasEnded(pod))) {
        await this.deletePod(names.pod);
        pod = undefined;
      }
      pod ??=
        (await this.api(
          `create the restricted runner's Pod`,
          signal,
          () =>
            this.core.createNamespacedPod(
              { namespace: this.namespace, body: restrictedPodManifest(spec, layout, this.manifestOptions) },
              this.requestOptions(signal),
            ),
          { exists: 'fine' },
        )) ?? (await this.readPod(names.pod, signal));
      if (!pod) throw new StartFailure('the pod went as soon as it was made');
      const uid = pod.metadata!.uid!;
      const ready = await this.pods.untilReady(names.pod, { deadline, timeoutMs: this.startTimeoutMs, signal, uid });
      const connection = await RunnerConnection.open(
        { host: ready.status!.podIP!, port: this.manifestOptions.ports.sandbox, token: tokens.sandbox },
        Math.max(1000, deadline - performance.now()),
      );
      const ping = await connection.call({ op: 'ping' });
      if (ping.version !== this.version && this.versionMismatch === 'refuse') {
        connection.close();
        throw new StartFailure(
          `its runner is version ${ping.version ?? 'unknown'} but this control plane is ${this.version}`,
        );
      }
      this.log(`kubernetes sandboxes: ${where} ready (network ${layout.network ? spec.network : 'none'})`);
      return new RestrictedRunner(connection);
    } catch (error) {
      const reason = signal.aborted ? 'the driver shut down during the start' : reasonOf(error);
      this.log(`kubernetes sandboxes: ${where} did not start: ${reason}`);
      if (!this.closed) await this.deleteRestricted(spec, names.pod).catch(() => undefined);
      throw new SandboxStartError(`a runner under the client's sandbox policy did not start: ${reason}`);
    } finally {
      this.starts.delete(abort);
    }
  }

  /**
   * The restricted runners' pods and NetworkPolicies of a sandbox (all of
   * them, or the one named), this driver's or an earlier one's: its pods are
   * found by label, and each NetworkPolicy has its pod's name (so the Role
   * needs no `list` on NetworkPolicies).
   */
  private async deleteRestricted(spec: SandboxSpec, only?: string): Promise<void> {
    const options = this.requestOptions();
    const names = new Set<string>(only ? [only] : []);
    if (!only) await this.findRestricted(spec, names, options);
    await Promise.all(
      [...names].map((name) =>
        Promise.all([
          this.deletePod(name),
          this.deleteIgnoringAbsent(`delete a restricted runner's NetworkPolicy`, 'other', () =>
            this.networking.deleteNamespacedNetworkPolicy({ name, namespace: this.namespace }, options),
          ),
        ]),
      ),
    );
  }

  /** Ends this driver's restricted runners of the sandbox, and adds the names of every restricted pod it has (by label). */
  private async findRestricted(spec: SandboxSpec, names: Set<string>, options: ConfigurationOptions): Promise<void> {
    for (const [id, pending] of this.restrictedRunners)
      if (id.startsWith(`${spec.id}/`)) {
        this.restrictedRunners.delete(id);
        (await pending.catch(() => undefined))?.end('the sandbox was stopped');
        names.add(`sandbox-${sandboxNames(spec.id).base}-r${id.slice(spec.id.length + 1)}`);
      }
    const pods = await this.core.listNamespacedPod(
      { namespace: this.namespace, labelSelector: `${RESTRICTED_OF_LABEL}=${sandboxNames(spec.id).base}` },
      options,
    );
    for (const pod of pods.items) names.add(pod.metadata!.name!);
  }

  /** Deletes the Pod (and its restricted runners') and waits until it is gone (its processes ended); the claims keep the files and the history. */
  async stop(spec: SandboxSpec): Promise<void> {
    const pending = this.podRunners.get(spec.id);
    this.podRunners.delete(spec.id);
    // a start under way finishes first, so its pod is the one deleted
    (await pending?.catch(() => undefined))?.end('the sandbox was stopped');
    await Promise.all([this.deletePod(sandboxNames(spec.id).pod), this.deleteRestricted(spec)]);
  }

  async remove(spec: SandboxSpec): Promise<void> {
    await this.stop(spec);
    const names = sandboxNames(spec.id);
    const options = this.requestOptions();
    await Promise.all([
      this.deleteIgnoringAbsent(`delete the sandbox's files claim`, 'other', () =>
        this.core.deleteNamespacedPersistentVolumeClaim({ name: names.files, namespace: this.namespace }, options),
      ),
      this.deleteIgnoringAbsent(`delete the sandbox's history claim`, 'other', () =>
        this.core.deleteNamespacedPersistentVolumeClaim({ name: names.history, namespace: this.namespace }, options),
      ),
      this.deleteIgnoringAbsent(`delete the sandbox's Secret`, 'secret', () =>
        this.core.deleteNamespacedSecret({ name: names.secret, namespace: this.namespace }, options),
      ),
      this.deleteIgnoringAbsent(`delete the sandbox's NetworkPolicy`, 'other', () =>
        this.networking.deleteNamespacedNetworkPolicy(
          { name: names.networkPolicy, namespace: this.namespace },
          options,
        ),
      ),
    ]);
    this.tokens.delete(spec.id);
  }

  /**
   * Closes the connections and the watch, and leaves every pod running: the
   * control plane may be restarting, and an agent's sandbox (its running
   * commands included) should outlive that. The next driver finds a pod by
   * its name and reconnects with the tokens in its Secret; idle pods are
   * stopped by whoever decides idleness, not here.
   */
  async close(): Promise<void> {
    this.closed = true;
    for (const abort of this.starts) abort.abort();
    const podRunners = [...this.podRunners.values()];
    this.podRunners.clear();
    const restricted = [...this.restrictedRunners.values()];
    this.restrictedRunners.clear();
    await Promise.all(
      restricted.map(async (pending) =>
        (await pending.catch(() => undefined))?.end('the control plane closed the sandbox driver'),
      ),
    );
    await Promise.all(
      podRunners.map(async (pending) =>
        (await pending.catch(() => undefined))?.end('the control plane closed the sandbox driver'),
      ),
    );
    for (const stop of [...this.following.values()]) stop();
    await this.pods.close();
  }

  private podRunner(spec: SandboxSpec): Promise<PodRunner> {
    if (this.closed) return Promise.reject(new SandboxStartError('the Kubernetes sandbox driver is shut down'));
    const running = this.podRunners.get(spec.id);
    if (running) return running;
    const pending = this.start(spec);
    this.podRunners.set(spec.id, pending);
    const forget = (): void => {
      if (this.podRunners.get(spec.id) === pending) this.podRunners.delete(spec.id);
    };
    pending.then((podRunner) => void podRunner.ended.then(forget), forget);
    return pending;
  }

  private async start(spec: SandboxSpec): Promise<PodRunner> {
    const abort = new AbortController();
    this.starts.add(abort);
    const signal = abort.signal;
    const names = sandboxNames(spec.id);
    const where = `sandbox ${spec.name} (pod ${this.namespace}/${names.pod})`;
    const deadline = performance.now() + this.startTimeoutMs;
    const connections: RunnerConnection[] = [];
    try {
      this.pods.start();
      let pod = await this.api(`read the sandbox's Pod`, signal, () => this.readPod(names.pod, signal));
      if (pod && (pod.metadata?.deletionTimestamp || hasEnded(pod))) {
        // on its way out, or never to run whole again: a new pod takes its name once it is gone
        this.log(
          `kubernetes sandboxes: ${where} ${pod.metadata?.deletionTimestamp ? 'is terminating' : `ended (${exitReason(pod)})`}; starting a new one`,
        );
        await this.deletePod(names.pod);
        pod = undefined;
      }
      const tokens = await this.runnerTokens(spec, signal);
      if (!pod) {
        await this.ensureStorage(spec, signal);
        const body = sandboxManifests(spec, tokens, this.manifestOptions).pod;
        pod =
          (await this.api(
            `create the sandbox's Pod`,
            signal,
            () => this.core.createNamespacedPod({ namespace: this.namespace, body }, this.requestOptions(signal)),
            { exists: 'fine' },
          )) ??
          // another replica started it meanwhile: that pod will do
          (await this.api(`read the sandbox's Pod`, signal, () => this.readPod(names.pod, signal)));
        if (!pod) throw new StartFailure('the pod went as soon as it was made');
      }
      // the watch may still hold news of a pod of the same name deleted just now: only this one counts
      const uid = pod.metadata!.uid!;
      const ready = await this.pods.untilReady(names.pod, { deadline, timeoutMs: this.startTimeoutMs, signal, uid });
      const host = ready.status!.podIP!;
      const timeoutMs = Math.max(1000, deadline - performance.now());
      const open = async (role: 'sandbox' | 'history'): Promise<RunnerConnection> => {
        const connection = await RunnerConnection.open(
          { host, port: this.manifestOptions.ports[role], token: tokens[role] },
          timeoutMs,
        );
        connections.push(connection);
        return connection;
      };
      const [sandbox, history] = await Promise.all([open('sandbox'), open('history')]);
      await this.checkVersions(where, sandbox, history);
      const init = await history.call({
        op: 'git',
        args: ['init', '--quiet', '--bare', `--initial-branch=${SNAPSHOT_BRANCH}`, HISTORY_DIR],
      });
      if (init.code !== 0) throw new StartFailure(`git init of the history failed: ${init.stderr.trim()}`);
      if (signal.aborted) throw new StartFailure('the driver shut down during the start');
      const podRunner = new PodRunner(spec, host, tokens, this.manifestOptions.ports, sandbox, history, () =>
        this.stop(spec),
      );
      this.follow(podRunner, names.pod, uid);
      this.log(`kubernetes sandboxes: ${where} ready at ${host} (network ${spec.network})`);
      return podRunner;
    } catch (error) {
      for (const connection of connections) connection.close();
      const reason = signal.aborted ? 'the driver shut down during the start' : reasonOf(error);
      this.log(`kubernetes sandboxes: ${where} did not start: ${reason}`);
      // the tokens are read again next time: the Secret may be what was wrong
      this.tokens.delete(spec.id);
      // a half-started pod would hold its node's resources, a refused one must not serve; at shutdown pods stay (see close)
      if (!this.closed) {
        await this.deletePod(names.pod).catch((cleanup: unknown) =>
          this.log(`kubernetes sandboxes: ${where} may be left running: ${reasonOf(cleanup)}`),
        );
      }
      throw new SandboxStartError(`sandbox ${spec.name} did not start: ${reason}`);
    } finally {
      this.starts.delete(abort);
    }
  }

  /** Both runners must be ours: a protocol of another version would be misread. */
  private async checkVersions(where: string, sandbox: RunnerConnection, history: RunnerConnection): Promise<void> {
    const [mine, theirs] = await Promise.all([sandbox.call({ op: 'ping' }), history.call({ op: 'ping' })]);
    const { sandbox: sandboxPort, history: historyPort } = this.manifestOptions.ports;
    if ((mine.role ?? 'sandbox') !== 'sandbox' || (theirs.role ?? 'history') !== 'history') {
      throw new StartFailure(
        `the runners answer as ${mine.role} on port ${sandboxPort} and ${theirs.role} on port ${historyPort}, not sandbox and history`,
      );
    }
    for (const ping of [mine, theirs]) {
      if (ping.version === this.version) continue;
      const version = ping.version ?? 'unknown';
      if (this.versionMismatch === 'warn') {
        this.log(
          `kubernetes sandboxes: warning: ${where} runs runner version ${version}, this control plane ${this.version}; using it anyway (versionMismatch: warn)`,
        );
        return;
      }
      throw new StartFailure(
        `its runner is version ${version} but this control plane is ${this.version}; the pod was stopped, the next start runs ${this.manifestOptions.image}`,
      );
    }
  }

  /**
   * A pod runner ends when its pod is deleted or has ended; an ended pod is deleted at once. The
   * watch on the pod outlives the runner: a killed container closes the runner's connection before
   * the pod's news arrives, and the pod must still be deleted and the reason told. It stops at the
   * pod's end, or when a later runner of the same pod takes over.
   */
  private follow(podRunner: PodRunner, name: string, uid: string): void {
    this.following.get(name)?.();
    const see = (pod: V1Pod | undefined, object: V1Pod): void => {
      // news of an earlier pod of the same name
      if (object.metadata?.uid !== uid) return;
      let reason: string | undefined;
      if (pod === undefined) reason = 'the pod was deleted';
      else if (pod.metadata?.deletionTimestamp) reason = 'the pod is being deleted';
      else if (hasEnded(pod)) reason = exitReason(pod);
      if (reason === undefined) return;
      stop();
      if (pod !== undefined && !pod.metadata?.deletionTimestamp && hasEnded(pod)) {
        this.log(
          `kubernetes sandboxes: sandbox ${podRunner.spec.name} (pod ${this.namespace}/${name}) ended: ${reason}`,
        );
        void this.deletePod(name).catch(() => undefined);
      }
      podRunner.end(reason);
    };
    const unfollow = this.pods.follow(name, see);
    const stop = (): void => {
      unfollow();
      if (this.following.get(name) === stop) this.following.delete(name);
    };
    this.following.set(name, stop);
    // what the watch saw since it showed this pod Ready: gone from it now means deleted since
    const current = this.pods.get(name);
    if (current === undefined) {
      stop();
      podRunner.end('the pod was deleted');
    } else see(current, current);
  }

  /** The runners' tokens: known, else from the sandbox's Secret, else a new Secret. */
  private async runnerTokens(spec: SandboxSpec, signal: AbortSignal): Promise<RunnerTokens> {
    const known = this.tokens.get(spec.id);
    if (known) return known;
    const names = sandboxNames(spec.id);
    const fresh: RunnerTokens = {
      sandbox: randomBytes(32).toString('base64url'),
      history: randomBytes(32).toString('base64url'),
    };
    const body = sandboxManifests(spec, fresh, this.manifestOptions).secret;
    const created = await this.api(
      `create the sandbox's Secret`,
      signal,
      () => this.core.createNamespacedSecret({ namespace: this.namespace, body }, this.requestOptions(signal)),
      {
        about: 'secret',
        exists: 'fine',
      },
    );
    let tokens = fresh;
    if (created === undefined) {
      const secret = await this.api(
        `read the sandbox's Secret`,
        signal,
        () =>
          this.core.readNamespacedSecret(
            { name: names.secret, namespace: this.namespace },
            this.requestOptions(signal),
          ),
        {
          about: 'secret',
        },
      );
      const read = (key: string): string => Buffer.from(secret?.data?.[key] ?? '', 'base64').toString('utf8');
      tokens = { sandbox: read(TOKEN_KEYS.sandbox), history: read(TOKEN_KEYS.history) };
      if (!tokens.sandbox || !tokens.history)
        throw new StartFailure(
          `the Secret ${names.secret} lacks the runners' tokens (${TOKEN_KEYS.sandbox}, ${TOKEN_KEYS.history})`,
        );
    }
    this.tokens.set(spec.id, tokens);
    return tokens;
  }

  /** The claims (kept if they exist) and the NetworkPolicy (replaced, so a changed `network` applies). */
  private async ensureStorage(spec: SandboxSpec, signal: AbortSignal): Promise<void> {
    const manifests = sandboxManifests(spec, { sandbox: '', history: '' }, this.manifestOptions);
    for (const claim of [manifests.files, manifests.history]) {
      await this.api(
        `create the claim ${claim.metadata!.name}`,
        signal,
        () =>
          this.core.createNamespacedPersistentVolumeClaim(
            { namespace: this.namespace, body: claim },
            this.requestOptions(signal),
          ),
        {
          exists: 'fine',
        },
      );
    }
    const policy = manifests.networkPolicy;
    const name = policy.metadata!.name!;
    const created = await this.api(
      `create the sandbox's NetworkPolicy`,
      signal,
      () =>
        this.networking.createNamespacedNetworkPolicy(
          { namespace: this.namespace, body: policy },
          this.requestOptions(signal),
        ),
      {
        exists: 'fine',
      },
    );
    if (created === undefined) {
      await this.api(`update the sandbox's NetworkPolicy`, signal, () =>
        this.networking.replaceNamespacedNetworkPolicy(
          { name, namespace: this.namespace, body: policy },
          this.requestOptions(signal),
        ),
      );
    }
  }

  private async readPod(name: string, signal?: AbortSignal): Promise<V1Pod | undefined> {
    try {
      return await this.core.readNamespacedPod({ name, namespace: this.namespace }, this.requestOptions(signal));
    } catch (error) {
      if (isApiStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /** Deletes the pod (absent is fine) and waits until it is gone: until then its processes may still write the files. */
  private async deletePod(name: string): Promise<void> {
    const options = this.requestOptions();
    await this.deleteIgnoringAbsent(`delete the sandbox's Pod`, 'other', () =>
      this.core.deleteNamespacedPod(
        { name, namespace: this.namespace, gracePeriodSeconds: DELETE_GRACE_SECONDS },
        options,
      ),
    );
    const until = performance.now() + GONE_TIMEOUT_MS;
    for (;;) {
      // a failed read proves nothing either way: ask again until the time is up
      if (
        await this.readPod(name).then(
          (pod) => pod === undefined,
          () => false,
        )
      )
        return;
      if (performance.now() > until)
        throw new Error(`pod ${this.namespace}/${name} still terminating after ${GONE_TIMEOUT_MS / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, this.retryIntervalMs));
    }
  }

  /**
   * One API call, its failure in words (never the Status message of a call
   * about the Secret, which a webhook may fill with its data). `exists:
   * 'fine'` answers undefined for a 409 AlreadyExists.
   */
  private async api<T>(
    what: string,
    signal: AbortSignal,
    call: () => Promise<T>,
    how: { about?: 'secret' | 'other'; exists?: 'fine' } = {},
  ): Promise<T | undefined> {
    try {
      return await call();
    } catch (error) {
      if (how.exists === 'fine' && isApiStatus(error, 409)) return undefined;
      if (signal.aborted) throw new StartFailure('the driver shut down during the start');
      throw new StartFailure(
        `could not ${what} in namespace "${this.namespace}": ${describeApiError(error, how.about ?? 'other')}`,
      );
    }
  }

  private deleteIgnoringAbsent(what: string, about: 'secret' | 'other', call: () => Promise<unknown>): Promise<void> {
    return deleteIgnoringAbsent(what, this.namespace, about, call);
  }

  private requestOptions(signal?: AbortSignal): ConfigurationOptions {
    return apiRequestOptions(this.requestTimeoutMs, signal);
  }
}

/** The runner of a running sandbox pod (its agent's container), and the history runner's connection beside it. */
class PodRunner implements SandboxRunner {
  readonly ended: Promise<void>;

  constructor(
    readonly spec: SandboxSpec,
    private readonly host: string,
    private readonly tokens: RunnerTokens,
    private readonly ports: { sandbox: number; history: number },
    readonly sandbox: RunnerConnection,
    readonly history: RunnerConnection,
    private readonly stopSandbox: () => Promise<void>,
  ) {
    // either connection lost ends the pod runner; runner(spec) then reconnects, to the same pod if it still runs
    this.ended = Promise.race([sandbox.closed, history.closed]).then((reason) => this.end(reason));
  }

  call<O extends RunnerOp>(request: Extract<RunnerRequest, { op: O }>): Promise<RunnerResult<O>> {
    return this.sandbox.call(request);
  }

  /** As the local runner's stop: the sandbox's processes end (the Pod goes), its files stay. */
  stop(): Promise<void> {
    return this.stopSandbox();
  }

  address(role: 'sandbox' | 'history'): RunnerAddress {
    return { host: this.host, port: this.ports[role], token: this.tokens[role] };
  }

  end(reason: string): void {
    this.sandbox.close(reason);
    this.history.close(reason);
  }
}

/** A restricted pod's runner: the commands of every MCP session under one layout of one sandbox. */
class RestrictedRunner {
  readonly ended: Promise<void>;

  constructor(private readonly connection: RunnerConnection) {
    this.ended = connection.closed.then(() => undefined);
  }

  /**
   * As one command's runner: the pod is the narrowing; the runner there only
   * sets TMPDIR, and what the layout left out is said on stderr. Stopping it
   * keeps the pod for the next command (the sandbox's stop deletes it).
   */
  withNotes(notes: string[], tmpdir: string | null): SandboxRunner {
    const connection = this.connection;
    return {
      call: async <O extends RunnerOp>(request: Extract<RunnerRequest, { op: O }>): Promise<RunnerResult<O>> => {
        if (request.op !== 'exec') return connection.call(request);
        const exec = request as Extract<RunnerRequest, { op: 'exec' }>;
        const ran = await connection.call({
          ...exec,
          ...(tmpdir ? { restrictions: { network: true, tmpdir } } : {}),
        });
        return { ...ran, stderr: notes.join('') + ran.stderr } as RunnerResult<O>;
      },
      ended: this.ended,
      stop: async () => undefined,
    };
  }

  end(reason: string): void {
    this.connection.close(reason);
  }
}

/**
 * A client's tighter bounds as a restricted pod's mounts. Each writable root
 * under /src must be a directory the sandbox's runner lists (the kubelet,
 * mounting it by subPath, refuses one that leaves the volume by a link);
 * under /tmp, only /tmp itself and TMPDIR, as the pod's /tmp is its own.
 */
async function layoutOf(
  main: SandboxRunner,
  restrictions: CommandRestrictions,
): Promise<{ layout: RestrictedLayout; notes: string[] }> {
  const notes: string[] = [];
  const ignore = (root: string, why: string): void => {
    notes.push(`[aileron] the writable root ${root} was ignored: ${why}\n`);
  };
  if (!restrictions.writable)
    return {
      layout: {
        src: 'rw',
        writable: [],
        readOnly: [],
        tmp: true,
        home: true,
        tmpdir: null,
        network: restrictions.network,
      },
      notes,
    };
  const layout: RestrictedLayout = {
    src: 'ro',
    writable: [],
    readOnly: [],
    tmp: false,
    home: false,
    tmpdir: null,
    network: restrictions.network,
  };
  for (const root of [...new Set(restrictions.writable)].sort()) {
    const normal = posix.normalize(root).replace(/(.)\/+$/, '$1');
    if (normal === '/tmp') layout.tmp = true;
    else if (normal === restrictions.tmpdir) layout.tmpdir = normal;
    else if (normal !== SANDBOX_WORKDIR && !normal.startsWith(`${SANDBOX_WORKDIR}/`))
      ignore(root, "on Kubernetes a command under a client's policy has a /tmp and home directory of its own, empty");
    else {
      const listed = await main.call({ op: 'ls', path: normal, recursive: false }).catch(() => null);
      // a file is listed as itself, by the path asked
      if (!listed || listed.entries.some((entry) => entry.path === normal)) {
        ignore(root, 'it is not a directory in the sandbox');
        continue;
      }
      const sub = posix.relative(SANDBOX_WORKDIR, normal);
      if (sub === '') layout.src = 'rw';
      else layout.writable.push(sub);
      for (const entry of listed.entries)
        if (entry.type === 'dir' && ['.git', '.codex'].includes(entry.path.split('/').pop()!))
          layout.readOnly.push(posix.join(sub, entry.path.split('/').pop()!));
    }
  }
  // a root inside another writable one is writable with it
  layout.writable =
    layout.src === 'rw'
      ? []
      : layout.writable.filter(
          (path) => !layout.writable.some((other) => other !== path && path.startsWith(`${other}/`)),
        );
  return { layout, notes };
}

/** A start failure whose message is already fit for a user. */
class StartFailure extends Error {}

function reasonOf(error: unknown): string {
  if (error instanceof StartFailure || error instanceof PodNotReady) return error.message;
  return error instanceof Error ? error.message : String(error);
}

function collect(input: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    input.on('data', (chunk: Buffer | string) => chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
    input.once('end', () => resolve(Buffer.concat(chunks)));
    input.once('error', reject);
  });
}

/** The control plane's own version, which its sandbox image is built with (images/sandbox-base). */
function packageVersion(): string {
  return (JSON.parse(readFileSync(join(projectRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}
