import type { V1Pod } from '@kubernetes/client-node';
import type { InstanceEndpoint, InstanceExit, RunningInstance } from '../driver';
import { podName } from './manifests';
import { isReady } from '@aileron/kubernetes';

/** What an instance needs of the driver that started it. */
export interface PodOwner {
  /** the pod as the API server has it now; undefined when it is gone */
  readPod(name: string): Promise<V1Pod | undefined>;
  /** deletes the pod and what it owns, and waits until the pod is really gone */
  remove(instanceId: string): Promise<void>;
  /** the instance is over: no longer the driver's to stop or to watch */
  forget(instanceId: string): void;
}

/** One instance the Kubernetes driver runs: a Pod, reached over Streamable HTTP at its IP. */
export class PodInstance implements RunningInstance {
  readonly exited: Promise<InstanceExit>;
  stopping = false;
  private settle!: (exit: InstanceExit) => void;
  private settled = false;
  private stopped: Promise<void> | undefined;
  private cleanup: Promise<void> | undefined;

  constructor(
    readonly id: string,
    readonly endpoint: InstanceEndpoint,
    private readonly driver: PodOwner,
    private readonly scrub: (text: string) => string,
  ) {
    this.exited = new Promise((resolve) => (this.settle = resolve));
  }

  async healthy(): Promise<boolean> {
    if (this.settled) return false;
    try {
      // read now rather than from the watch: the request timeout bounds it, and a slow API server reads as unhealthy
      return isReady(await this.driver.readPod(podName(this.id)));
    } catch {
      return false;
    }
  }

  stop(): Promise<void> {
    this.stopping = true;
    if (this.settled && this.cleanup) return this.cleanup;
    this.stopped ??= this.driver.remove(this.id).then(
      () => {
        this.driver.forget(this.id);
        this.finish({ reason: 'stopped', requested: true });
      },
      (error: unknown) => {
        // a later stop() tries again
        this.stopped = undefined;
        throw new Error(this.scrub(error instanceof Error ? error.message : String(error)));
      },
    );
    return this.stopped;
  }

  /**
   * The watch saw the pod end or vanish; its leftovers (the Secret above
   * all) go at once. Answers the reason it settled with, if it did.
   */
  ended(reason: string): string | undefined {
    if (this.settled || this.stopping) return undefined;
    this.driver.forget(this.id);
    const exit = { reason: this.scrub(reason), requested: false };
    this.finish(exit);
    this.cleanup = this.driver.remove(this.id).catch(() => undefined);
    return exit.reason;
  }

  private finish(exit: InstanceExit): void {
    if (this.settled) return;
    this.settled = true;
    this.settle(exit);
  }
}
