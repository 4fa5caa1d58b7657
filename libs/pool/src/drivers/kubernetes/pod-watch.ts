import { ADD, DELETE, ERROR, ListWatch, UPDATE, Watch, type KubeConfig, type V1Pod, type V1PodList } from '@kubernetes/client-node';

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
  private readonly followers = new Map<string, Set<(pod: V1Pod | undefined) => void>>();
  private started = false;
  private closed = false;
  /** the error of the outage under way, if one is */
  private failure: { error: unknown } | undefined;
  /** counts errors, so that a (re)connection knows whether it succeeded */
  private errors = 0;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: PodWatchOptions) {
    this.watch = new BoundedWatch(options.kubeConfig);
    this.informer = new ListWatch(`/api/v1/namespaces/${encodeURIComponent(options.namespace)}/pods`, this.watch, options.list, false, options.labelSelector);
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
   * (undefined: deleted) until the returned function is called. What the
   * watch saw before is `get(name)`.
   */
  follow(name: string, see: (pod: V1Pod | undefined) => void): () => void {
    let set = this.followers.get(name);
    if (set === undefined) this.followers.set(name, (set = new Set()));
    set.add(see);
    return () => {
      set.delete(see);
      if (set.size === 0 && this.followers.get(name) === set) this.followers.delete(name);
    };
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
    if (set !== undefined) for (const see of [...set]) see(state);
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
    callback: (phase: string, apiObj: any, watchObj?: any) => void,
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
