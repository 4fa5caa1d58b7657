import {
  ADD,
  DELETE,
  ERROR,
  ListWatch,
  UPDATE,
  Watch,
  type CoreV1Api,
  type KubeConfig,
  type V1Pod,
  type V1PodList,
} from '@kubernetes/client-node';
import { apiRequestOptions, describeApiError } from './kubernetes-api';
import { exitReason, hasEnded, hopelessReason, isReady, pendingReason } from './pod-status';

export interface PodWatchOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /** which pods: the driver's own label */
  labelSelector: string;
  /** the LIST the watch starts from, and starts again from after the API server's history no longer reaches back (410 Gone) */
  list: () => Promise<V1PodList>;
  /** how long to wait before watching again after the API server refused or could not be reached */
  retryIntervalMs: number;
  /** the watch stopped working; it is retried until close(). Called once per outage. */
  failing: (error: unknown) => void;
  /** it works again after `failing` */
  recovered: () => void;
}

/**
 * A watch's timeout at the API server, which then ends it and the informer
 * resumes from the last resourceVersion; client-go picks 5 to 10 minutes.
 * With WATCH_GRACE_SECONDS more and no end heard, the connection is taken for
 * dead (a partition drops the FIN too) and abandoned.
 */
const WATCH_SECONDS = 300;
const WATCH_GRACE_SECONDS = 30;

/**
 * The driver's pods, kept current by one watch on the API server (a
 * client-node ListWatch informer): one LIST, then one long-lived GET that
 * streams every change, however many instances run, instead of reading pod
 * status on a timer. After a dropped watch the informer resumes from the last
 * resourceVersion it saw; when the API server's history no longer reaches back
 * that far (410 Gone) it lists again, and a pod missing from the new list
 * counts as deleted.
 */
export class PodWatch {
  private readonly watch: BoundedWatch;
  private readonly informer: ListWatch<V1Pod>;
  private readonly followers = new Map<string, Set<PodFollower>>();
  private started = false;
  private closed = false;
  /** the error of the outage under way, if one is */
  private failure: { error: unknown } | undefined;
  /** counts errors, so that a (re)connection knows whether it succeeded */
  private errors = 0;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: PodWatchOptions) {
    this.watch = new BoundedWatch(options.kubeConfig);
    this.informer = new ListWatch(
      `/api/v1/namespaces/${encodeURIComponent(options.namespace)}/pods`,
      this.watch,
      options.list,
      false,
      options.labelSelector,
    );
    this.informer.on(ADD, (pod) => this.tell(pod, pod));
    this.informer.on(UPDATE, (pod) => this.tell(pod, pod));
    this.informer.on(DELETE, (pod) => this.tell(pod, undefined));
    // A failed LIST or watch leaves the informer stopped (a 410 Gone it handles itself).
    this.informer.on(ERROR, (error: unknown) => this.failed(error));
  }

  /** Starts watching, once; a no-op after close(). */
  start(): void {
    if (this.started || this.closed) return;
    this.started = true;
    void this.connect();
  }

  /** The pod as the watch last saw it; undefined when it has not seen it or saw it go. */
  get(name: string): V1Pod | undefined {
    return this.informer.get(name, this.options.namespace);
  }

  /** Why the watch is not working now, if it is not. */
  get outage(): unknown {
    return this.failure?.error;
  }

  /**
   * Calls `see` with every state of the pod the watch sees from now on
   * (undefined: deleted; `object` is then the pod as it was) until the
   * returned function is called. What the watch saw before is `get(name)`.
   */
  follow(name: string, see: PodFollower): () => void {
    let set = this.followers.get(name);
    if (set === undefined) this.followers.set(name, (set = new Set()));
    set.add(see);
    return () => {
      set.delete(see);
      if (set.size === 0 && this.followers.get(name) === set) this.followers.delete(name);
    };
  }

  /**
   * Resolves with the pod once the watch shows it Ready with an IP; rejects
   * with a PodNotReady, its message fit for people, at once on what will not
   * get better (the pod ended or went, a container that cannot start), else
   * at the deadline, saying what the pod waits for. With `uid`, news of
   * another pod of the same name (an earlier one, deleted) is ignored.
   * `deadline` is on `performance.now()`: it bounds a real wait on the cluster,
   * which a wall-clock step must neither cut short nor stretch.
   */
  untilReady(
    name: string,
    wait: { deadline: number; timeoutMs: number; signal: AbortSignal; uid?: string },
  ): Promise<V1Pod> {
    const { deadline, timeoutMs, signal, uid } = wait;
    return new Promise((resolve, reject) => {
      let last: V1Pod | undefined;
      let settled = false;
      const settle = (ready: V1Pod | undefined, failure?: string): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        unfollow();
        signal.removeEventListener('abort', aborted);
        if (failure !== undefined) reject(new PodNotReady(failure));
        else resolve(ready!);
      };
      const see = (pod: V1Pod | undefined, object: V1Pod): void => {
        if (uid !== undefined && object.metadata?.uid !== uid) return;
        if (pod === undefined) return settle(undefined, 'the pod was deleted before it became ready');
        last = pod;
        if (hasEnded(pod)) return settle(undefined, `it ended before it became ready: ${exitReason(pod)}`);
        if (isReady(pod) && pod.status?.podIP) return settle(pod);
        const hopeless = hopelessReason(pod);
        if (hopeless !== undefined) settle(undefined, hopeless);
      };
      const aborted = (): void => settle(undefined, 'the driver shut down during the start');
      const timer = setTimeout(
        () => {
          const outage = this.outage;
          const why =
            last === undefined && outage !== undefined
              ? `could not watch pod status: ${describeApiError(outage, 'other')}`
              : pendingReason(last);
          settle(undefined, `not ready within ${Math.round(timeoutMs / 1000)} s (${why})`);
        },
        Math.max(0, deadline - performance.now()),
      );
      const unfollow = this.follow(name, see);
      signal.addEventListener('abort', aborted, { once: true });
      if (signal.aborted) return aborted();
      // what the watch saw before this wait began to follow the pod
      const seen = this.get(name);
      if (seen !== undefined) see(seen, seen);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    await this.informer.stop();
    this.watch.close();
  }

  private tell(pod: V1Pod, state: V1Pod | undefined): void {
    const set = pod.metadata?.name === undefined ? undefined : this.followers.get(pod.metadata.name);
    // a copy: a follower may stop following (or another start) while being told
    if (set !== undefined) for (const see of [...set]) see(state, pod);
  }

  private async connect(): Promise<void> {
    const before = this.errors;
    // resolves once the watch is established, or has failed (then ERROR came first)
    await this.informer.start().catch((error: unknown) => this.failed(error));
    if (this.closed || this.errors !== before || this.failure === undefined) return;
    this.failure = undefined;
    this.options.recovered();
  }

  private failed(error: unknown): void {
    // stopping the informer aborts its request, which it reports as an error
    if (this.closed) return;
    this.errors++;
    if (this.failure === undefined) {
      this.failure = { error };
      this.options.failing(error);
    } else {
      this.failure.error = error;
    }
    if (this.retryTimer !== undefined) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.connect();
    }, this.options.retryIntervalMs);
    // the driver's close() ends the watch; a pending retry must not hold the process open
    this.retryTimer.unref();
  }
}

/**
 * The watch of a driver's own pods (`labelSelector` in `namespace`), its LIST
 * bounded like every API call, and its outage logged once when the watch
 * stops working and once when it works again, not at every retry; `who`
 * names the driver in those lines ("kubernetes pool").
 */
export function watchDriverPods(options: {
  who: string;
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  namespace: string;
  labelSelector: string;
  requestTimeoutMs: number;
  retryIntervalMs: number;
  log: (line: string) => void;
}): PodWatch {
  const { who, namespace, labelSelector, log } = options;
  return new PodWatch({
    kubeConfig: options.kubeConfig,
    namespace,
    labelSelector,
    list: () =>
      options.core.listNamespacedPod({ namespace, labelSelector }, apiRequestOptions(options.requestTimeoutMs)),
    retryIntervalMs: options.retryIntervalMs,
    failing: (error) =>
      log(
        `${who}: could not watch pod status in namespace ${namespace}, retrying: ${describeApiError(error, 'other')}`,
      ),
    recovered: () => log(`${who}: watching pod status in namespace ${namespace} works again`),
  });
}

/** Told each state of a pod the watch sees: `pod` undefined once deleted, `object` the pod the news is of. */
export type PodFollower = (pod: V1Pod | undefined, object: V1Pod) => void;

/** A pod that did not become ready; the message says why, in words for people. */
export class PodNotReady extends Error {}

/**
 * client-node's Watch, with a timeout the API server applies (and a bound
 * of its own past it, see WATCH_SECONDS), and ended by close() even while it
 * is still connecting: a stopped informer aborts only a watch it already
 * holds, so one established after it stopped would stay open.
 */
class BoundedWatch extends Watch {
  private readonly open = new Set<AbortController>();
  private closed = false;

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the signature of @kubernetes/client-node's Watch, which this overrides
    callback: (phase: string, apiObj: any, watchObj?: any) => void,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- likewise
    done: (err: any) => void,
  ): Promise<AbortController> {
    let ended = false;
    let controller: AbortController | undefined;
    let timer: NodeJS.Timeout | undefined;
    const end = (error: unknown): void => {
      ended = true;
      clearTimeout(timer);
      if (controller !== undefined) this.open.delete(controller);
      done(error);
    };
    controller = await super.watch(path, { ...queryParams, timeoutSeconds: WATCH_SECONDS }, callback, end);
    if (ended) return controller;
    if (this.closed) {
      controller.abort();
      return controller;
    }
    this.open.add(controller);
    const established = controller;
    timer = setTimeout(() => established.abort(), (WATCH_SECONDS + WATCH_GRACE_SECONDS) * 1000);
    timer.unref();
    return controller;
  }

  close(): void {
    this.closed = true;
    for (const controller of this.open) controller.abort();
    this.open.clear();
  }
}
