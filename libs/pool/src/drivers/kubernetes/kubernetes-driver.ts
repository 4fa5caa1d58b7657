import { randomBytes } from 'node:crypto';
import { forbiddenVariables } from '@aileron/catalog';
import {
  CoreV1Api,
  NetworkingV1Api,
  PatchStrategy,
  setHeaderOptions,
  type ConfigurationOptions,
  type KubeConfig,
  type V1Pod,
} from '@kubernetes/client-node';
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
  InstanceStartError,
  type InstanceDriver,
  type InstanceEndpoint,
  type InstanceSpec,
  type RunningInstance,
} from '../driver';
import {
  INSTANCE_LABEL,
  instanceManifests,
  MANAGED_BY_SELECTOR,
  networkPolicyName,
  ownedByPod,
  podName,
  REPLICA_LABEL,
  replicaLabelValue,
  secretName,
  type ManifestOptions,
} from './manifests';
import { PodInstance, type PodOwner } from './pod-instance';

export interface KubernetesDriverOptions {
  /** built by the caller: `loadFromCluster()` in a pod, else `loadFromDefault()` */
  kubeConfig: KubeConfig;
  /** where instance pods, their Secrets and NetworkPolicies live */
  namespace: string;
  /** image whose entrypoint is the bridge; runs `run.kind === 'command'` servers */
  runnerImage: string;
  /** the container's Streamable HTTP port (default 8080) */
  port?: number;
  /** from the first API call until the pod is Ready (default 60 s) */
  startTimeoutMs?: number;
  /** how long to wait before asking the API server again: after a failed watch, and while a deleted pod terminates (default 1 s) */
  retryIntervalMs?: number;
  /** bound on each API request, and so on healthy() (default 10 s) */
  requestTimeoutMs?: number;
  /** the control plane's namespace when it is not `namespace`: its pods alone may connect */
  controlPlaneNamespace?: string;
  /** private ranges the pods may reach besides the public internet and cluster DNS */
  egressAllowCidrs?: string[];
  /** public ranges they must not reach besides the private ones, e.g. the cluster's global IPv6 pod range */
  egressExceptCidrs?: string[];
  /**
   * The control plane's own Pod (downward API), when it runs in the cluster:
   * the name labels what this replica makes, the UID owns it. Lets Kubernetes
   * collect a crashed replica's instances and a restarted one reap them.
   */
  controlPlanePod?: { name: string; uid?: string };
  /** one line per event, as the local driver's; never an env value or a token */
  log: (line: string) => void;
}

const DELETE_GRACE_SECONDS = 5;
/** After the grace period the kubelet kills; this covers a slow kubelet before stop() gives up waiting. */
const GONE_TIMEOUT_MS = (DELETE_GRACE_SECONDS + 25) * 1000;

/**
 * Runs each instance as a Pod (plus a Secret holding its environment and a
 * NetworkPolicy admitting only the control plane), reached over Streamable
 * HTTP at the pod's IP. Everything the driver creates carries
 * `app.kubernetes.io/managed-by: aileron`; the Secret and the NetworkPolicy
 * are owned by the Pod, so deleting the Pod by any means removes them too.
 *
 * Pod status (readiness while starting, the end of a running pod) arrives by
 * one watch on the driver's pods (PodWatch), not by reading on a timer.
 *
 * The control plane's service account needs, in `namespace`: pods (create,
 * get, list, watch, delete), secrets (create, patch, delete) and
 * networking.k8s.io networkpolicies (create, patch, delete). It never reads
 * a Secret back.
 */
export class KubernetesDriver implements InstanceDriver, PodOwner {
  readonly kind = 'kubernetes' as const;
  private readonly core: CoreV1Api;
  private readonly networking: NetworkingV1Api;
  private readonly namespace: string;
  private readonly manifestOptions: ManifestOptions;
  private readonly port: number;
  private readonly startTimeoutMs: number;
  private readonly retryIntervalMs: number;
  private readonly requestTimeoutMs: number;
  private readonly log: (line: string) => void;
  /** everything started and not yet cleaned up, starting ones included, so close() reaches them all */
  private readonly live = new Map<string, PodInstance>();
  /** ends each live instance's following of its pod */
  private readonly unfollow = new Map<string, () => void>();
  private readonly starting = new Map<string, { abort: AbortController; done: Promise<unknown> }>();
  private readonly pods: PodWatch;
  private closed = false;
  /** the start-up sweep of what an earlier run of this replica left; never rejects, and every start waits for it */
  private readonly reaped: Promise<void>;

  constructor(options: KubernetesDriverOptions) {
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.networking = options.kubeConfig.makeApiClient(NetworkingV1Api);
    this.namespace = options.namespace;
    this.port = options.port ?? 8080;
    this.startTimeoutMs = options.startTimeoutMs ?? 60_000;
    this.retryIntervalMs = options.retryIntervalMs ?? 1000;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
    this.log = options.log;
    this.manifestOptions = {
      namespace: options.namespace,
      runnerImage: options.runnerImage,
      port: this.port,
      ...(options.controlPlaneNamespace ? { controlPlaneNamespace: options.controlPlaneNamespace } : {}),
      ...(options.egressAllowCidrs ? { egressAllowCidrs: options.egressAllowCidrs } : {}),
      ...(options.egressExceptCidrs ? { egressExceptCidrs: options.egressExceptCidrs } : {}),
      ...(options.controlPlanePod ? { replica: this.replica(options) } : {}),
    };
    this.pods = watchDriverPods({
      who: 'kubernetes pool',
      kubeConfig: options.kubeConfig,
      core: this.core,
      namespace: this.namespace,
      labelSelector: MANAGED_BY_SELECTOR,
      requestTimeoutMs: this.requestTimeoutMs,
      retryIntervalMs: this.retryIntervalMs,
      log: this.log,
    });
    this.reaped = this.reap();
  }

  /**
   * Owner references cannot cross namespaces: the garbage collector reads an
   * owner in another namespace as gone and would delete every instance at
   * once. So the UID is used only when the control plane's namespace (given,
   * else the in-cluster service account's) is the pool's; the replica label
   * still lets a restart reap.
   */
  private replica(options: KubernetesDriverOptions): { name: string; uid?: string } {
    const { name, uid } = options.controlPlanePod!;
    if (!uid) return { name };
    const home =
      options.controlPlaneNamespace ??
      options.kubeConfig.getContextObject(options.kubeConfig.getCurrentContext())?.namespace;
    if (home === options.namespace) return { name, uid };
    this.log(
      `kubernetes pool: the control plane's namespace (${home ?? 'unknown'}) is not ${options.namespace}, so instance pods are not owned by pod ${name}; Kubernetes will not delete them if this replica dies`,
    );
    return { name };
  }

  start(spec: InstanceSpec): Promise<RunningInstance> {
    if (this.closed) return Promise.reject(new InstanceStartError('the Kubernetes instance driver is shut down'));
    const abort = new AbortController();
    const done = this.run(spec, abort.signal).finally(() => this.starting.delete(spec.id));
    this.starting.set(spec.id, { abort, done: done.catch(() => undefined) });
    return done;
  }

  private async run(spec: InstanceSpec, signal: AbortSignal): Promise<RunningInstance> {
    // the pod's environment is the container's, not a host program's; still, the same names are never set (entries stored before they were refused)
    const forbidden = forbiddenVariables(spec.env);
    if (forbidden.length > 0) throw new InstanceStartError(forbidden.map((f) => f.reason).join('; '));
    // the sweep lists this replica's pods: one created before it answered would be reaped as a leftover
    await this.reaped;
    this.pods.start();
    const token = randomBytes(32).toString('base64url');
    const scrub = scrubber([...spec.secrets, token]);
    const manifests = instanceManifests(spec, token, this.manifestOptions);
    const name = podName(spec.id);
    const where = `pod ${this.namespace}/${name} (server ${spec.server}, workspace ${spec.workspaceId})`;
    const deadline = performance.now() + this.startTimeoutMs;
    try {
      if (signal.aborted) throw new StartFailure('the driver shut down during the start');
      await this.api(`create the instance's Secret`, 'secret', signal, () =>
        this.core.createNamespacedSecret(
          { namespace: this.namespace, body: manifests.secret },
          this.requestOptions(signal),
        ),
      );
      // before the Pod, so the pod never runs a moment without its ingress rule
      await this.api(`create the instance's NetworkPolicy`, 'other', signal, () =>
        this.networking.createNamespacedNetworkPolicy(
          { namespace: this.namespace, body: manifests.networkPolicy },
          this.requestOptions(signal),
        ),
      );
      const created = await this.api(`create the instance's Pod`, 'other', signal, () =>
        this.core.createNamespacedPod({ namespace: this.namespace, body: manifests.pod }, this.requestOptions(signal)),
      );
      const owner = ownedByPod({ name, uid: created.metadata?.uid ?? '' });
      const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch, this.requestOptions(signal));
      await this.api(`make the Pod own its Secret`, 'secret', signal, () =>
        this.core.patchNamespacedSecret({ name: secretName(spec.id), namespace: this.namespace, body: owner }, merge),
      );
      await this.api(`make the Pod own its NetworkPolicy`, 'other', signal, () =>
        this.networking.patchNamespacedNetworkPolicy(
          { name: networkPolicyName(spec.id), namespace: this.namespace, body: owner },
          merge,
        ),
      );
      const podIP = await this.waitUntilReady(name, deadline, signal);
      if (signal.aborted) throw new StartFailure('the driver shut down during the start');
      const host = podIP.includes(':') ? `[${podIP}]` : podIP;
      const endpoint: InstanceEndpoint = {
        url: `http://${host}:${this.port}/mcp`,
        headers: { authorization: `Bearer ${token}` },
      };
      const instance = new PodInstance(spec.id, endpoint, this, scrub);
      this.live.set(spec.id, instance);
      this.unfollow.set(
        spec.id,
        this.pods.follow(name, (pod) => this.observe(instance, pod)),
      );
      // seen Ready by the watch, so absent from it now only if deleted since
      this.observe(instance, this.pods.get(name));
      this.log(`kubernetes pool: ${where} ready at ${podIP}`);
      return instance;
    } catch (error) {
      const reason =
        error instanceof StartFailure
          ? error.message
          : this.closed
            ? 'the driver shut down during the start'
            : describe(error, 'other');
      const message = scrub(`instance ${spec.server} (pod ${name}) did not start: ${reason}`);
      this.log(`kubernetes pool: ${where} did not start: ${scrub(reason)}`);
      await this.remove(spec.id).catch((cleanupError: unknown) =>
        this.log(
          `kubernetes pool: ${where} may be left behind: ${scrub(cleanupError instanceof Error ? cleanupError.message : String(cleanupError))}`,
        ),
      );
      throw new InstanceStartError(message);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const starts = [...this.starting.values()];
    for (const { abort } of starts) abort.abort();
    // an aborted start deletes what it created itself
    await Promise.all([this.pods.close(), this.reaped, ...starts.map(({ done }) => done)]);
    const results = await Promise.allSettled([...this.live.values()].map((instance) => instance.stop()));
    const failed = results.filter((result) => result.status === 'rejected').length;
    if (failed > 0)
      throw new Error(
        `${failed} pool pod(s) could not be deleted; they keep the label app.kubernetes.io/managed-by=aileron`,
      );
  }

  /** @internal */
  async readPod(name: string, signal?: AbortSignal): Promise<V1Pod | undefined> {
    try {
      return await this.core.readNamespacedPod({ name, namespace: this.namespace }, this.requestOptions(signal));
    } catch (error) {
      if (isApiStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /**
   * Deletes the pod, its Secret and its NetworkPolicy (404 is fine), then
   * waits until the pod is really gone: until then the container may still
   * be running with the tenant's credentials.
   * @internal
   */
  async remove(instanceId: string): Promise<void> {
    const name = podName(instanceId);
    await this.deleteObjects(instanceId);
    const until = performance.now() + GONE_TIMEOUT_MS;
    for (;;) {
      // a failed read proves nothing either way: ask again until the time is up
      const gone = await this.readPod(name).then(
        (pod) => pod === undefined,
        () => false,
      );
      if (gone) return;
      if (performance.now() > until) {
        this.log(
          `kubernetes pool: pod ${this.namespace}/${name} still terminating after ${GONE_TIMEOUT_MS / 1000} s; not waiting longer`,
        );
        return;
      }
      await sleep(this.retryIntervalMs);
    }
  }

  /**
   * Deletes an instance's Pod, Secret and NetworkPolicy (404 is fine) without
   * waiting for the pod to go. The Secret and NetworkPolicy by name too: a
   * crash before the Pod took them over leaves them owned by the control
   * plane alone.
   */
  private async deleteObjects(instanceId: string): Promise<void> {
    const name = podName(instanceId);
    const options = this.requestOptions();
    await Promise.all([
      this.deleteIgnoringAbsent(`delete the instance's Pod`, 'other', () =>
        this.core.deleteNamespacedPod(
          { name, namespace: this.namespace, gracePeriodSeconds: DELETE_GRACE_SECONDS },
          options,
        ),
      ),
      this.deleteIgnoringAbsent(`delete the instance's Secret`, 'secret', () =>
        this.core.deleteNamespacedSecret({ name: secretName(instanceId), namespace: this.namespace }, options),
      ),
      this.deleteIgnoringAbsent(`delete the instance's NetworkPolicy`, 'other', () =>
        this.networking.deleteNamespacedNetworkPolicy(
          { name: networkPolicyName(instanceId), namespace: this.namespace },
          options,
        ),
      ),
    ]);
  }

  /**
   * Deletes the pods an earlier run of this replica left: instances live only
   * in this process's memory, so no pod of ours from before this start can
   * still be in use. Several replicas share the namespace, so "ours" must be
   * certain: an ownerReference to this Pod's UID, or, on a pod with no owner
   * at all, this replica's label. A pod owned by another UID belongs to
   * another replica (alive, or gone and left to the garbage collector). An
   * unowned pod without our label was made by an older release or a control
   * plane outside the cluster, which may be running still: only counted.
   */
  private async reap(): Promise<void> {
    const me = this.manifestOptions.replica;
    let pods: V1Pod[];
    try {
      pods = (
        await this.core.listNamespacedPod(
          { namespace: this.namespace, labelSelector: MANAGED_BY_SELECTOR },
          this.requestOptions(),
        )
      ).items;
    } catch (error) {
      this.log(
        `kubernetes pool: could not look for pods an earlier run left in namespace ${this.namespace}: ${describe(error, 'other')}`,
      );
      return;
    }
    // every pod this driver makes carries its instance id, which names its Secret and NetworkPolicy too
    const ours: string[] = [];
    let unknown = 0;
    for (const pod of pods) {
      const owners = pod.metadata?.ownerReferences ?? [];
      const instanceId = pod.metadata?.labels?.[INSTANCE_LABEL];
      const mine =
        owners.length > 0
          ? me?.uid !== undefined && owners.some((owner) => owner.uid === me.uid)
          : me !== undefined && pod.metadata?.labels?.[REPLICA_LABEL] === replicaLabelValue(me.name);
      if (mine && instanceId !== undefined) ours.push(instanceId);
      else if (owners.length === 0) unknown++;
    }
    if (unknown > 0) {
      this.log(
        `kubernetes pool: warning: ${unknown} pod(s) labelled ${MANAGED_BY_SELECTOR} in namespace ${this.namespace} have no owner and were not made by this replica; left alone (delete them by hand once no control plane outside the cluster uses them)`,
      );
    }
    if (ours.length === 0) return;
    // not waiting for them to be gone: new instances get new names, so nothing waits on these
    const results = await Promise.allSettled(ours.map((instanceId) => this.deleteObjects(instanceId)));
    const failures = results.flatMap((result) =>
      result.status === 'rejected' ? [String((result.reason as Error).message)] : [],
    );
    this.log(
      `kubernetes pool: deleted ${ours.length - failures.length} pod(s) an earlier run of this replica left in namespace ${this.namespace}`,
    );
    // one line, not one per pod: the cause (RBAC, most likely) is the same for all
    if (failures.length > 0)
      this.log(`kubernetes pool: ${failures.length} leftover pod(s) not deleted: ${failures[0]}`);
  }

  /** @internal */
  forget(instanceId: string): void {
    this.live.delete(instanceId);
    this.unfollow.get(instanceId)?.();
    this.unfollow.delete(instanceId);
  }

  /** The pod's IP once the watch shows it Ready; a StartFailure saying why it is not, else. */
  private async waitUntilReady(name: string, deadline: number, signal: AbortSignal): Promise<string> {
    try {
      const pod = await this.pods.untilReady(name, { deadline, timeoutMs: this.startTimeoutMs, signal });
      return pod.status!.podIP!;
    } catch (error) {
      throw error instanceof PodNotReady ? new StartFailure(error.message) : error;
    }
  }

  /** A live instance's pod changed (undefined: it was deleted): an ended or vanished pod ends the instance. */
  private observe(instance: PodInstance, pod: V1Pod | undefined): void {
    if (pod !== undefined && !hasEnded(pod)) return;
    const reason = instance.ended(pod === undefined ? 'the pod was deleted' : exitReason(pod));
    if (reason) this.log(`kubernetes pool: pod ${this.namespace}/${podName(instance.id)} ended: ${reason}`);
  }

  /**
   * Runs one API call and turns any failure into a reason fit for a user. The
   * body of an answer about the Secret is never quoted: an admission webhook
   * may echo the object it refused, data included.
   */
  private async api<T>(
    what: string,
    about: 'secret' | 'other',
    signal: AbortSignal,
    call: () => Promise<T>,
  ): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (signal.aborted) throw new StartFailure('the driver shut down during the start');
      throw new StartFailure(`could not ${what} in namespace "${this.namespace}": ${describe(error, about)}`);
    }
  }

  private deleteIgnoringAbsent(what: string, about: 'secret' | 'other', call: () => Promise<unknown>): Promise<void> {
    return deleteIgnoringAbsent(what, this.namespace, about, call);
  }

  /** Per-request options: a timeout on every call, and the start's abort. */
  private requestOptions(signal?: AbortSignal): ConfigurationOptions {
    return apiRequestOptions(this.requestTimeoutMs, signal);
  }
}

/** A start failure whose message is already fit for a user. */
class StartFailure extends Error {}

/** An API failure for people (see describeApiError); a StartFailure is already in words. */
function describe(error: unknown, about: 'secret' | 'other'): string {
  return error instanceof StartFailure ? error.message : describeApiError(error, about);
}

/** Replaces each known secret value in text; anything shown to people passes through it. */
function scrubber(secrets: string[]): (text: string) => string {
  const values = secrets.filter((value) => value.length > 0).sort((a, b) => b.length - a.length);
  return (text) => values.reduce((out, value) => out.split(value).join('[redacted]'), text);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
