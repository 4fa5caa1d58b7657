import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync, mkdirSync, realpathSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { systemRootArgs } from '@aileron/bubblewrap';
import type { FakeKubernetes } from './fake-kubernetes';

/** Objects as the fake API server stores them. */
type Json = any;

/** What an image is, for this kubelet: files of ours bound in, its environment, its entrypoint. */
export interface FakeImage {
  /** directories of this machine the image holds, read-only, at `target` */
  binds: { source: string; target: string }[];
  /** the image's ENV */
  env: Record<string, string>;
  /** the image's ENTRYPOINT; the container's args follow it. None: the args are the command (as tini's `--` runs them). */
  entrypoint?: string[];
}

export interface ProcessKubeletOptions {
  /** one directory per claim below it: the cluster's persistent volumes */
  volumes: string;
  /** the images there are; any other fails to pull */
  images: Record<string, FakeImage>;
  /**
   * The container's args as they run here. A pod has a network namespace of
   * its own, where binding every address binds the pod's IP; here every pod
   * shares this machine's, so a program's listening address may need the
   * pod's IP spelt out.
   */
  args?: (args: string[], podIP: string) => string[];
}

interface Running {
  child: ChildProcess;
  exited: Promise<number>;
  stderr: string;
}

/** What a real kubelet would give the processes but this one cannot; kept out of their way. */
const ETC = [
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/resolv.conf',
  '/etc/hosts',
  '/etc/nsswitch.conf',
  '/etc/alternatives',
  '/etc/localtime',
  '/etc/ld.so.cache',
];
const PATH = '/usr/local/bin:/usr/bin:/bin';

/**
 * A kubelet for the fake API server that really runs a pod's containers, as
 * processes on this machine, each in bubblewrap as a container runtime would
 * set it up: the pod's user (user namespace), no capabilities, its own pid,
 * ipc and mount namespaces, the system read-only (a read-only root file
 * system), an empty directory per emptyDir, a directory per claim that
 * outlives the pod (the persistent volume, deleted with its claim, made with
 * the `lost+found` a new ext4 file system has at its root), read-only
 * where the volume mount says so, a subPath of it where the mount names
 * one, the environment from the pod spec and its Secrets. Every pod gets an
 * IP of its own in 127.0.0.0/8.
 *
 * What it does not do: enforce resources (cgroups), enforce NetworkPolicies
 * (the pods share this machine's network), pull images (an image is
 * `images[name]`: files of ours and an environment), or schedule (claims and
 * Secrets are waited for as the scheduler and kubelet do; affinity is
 * moot: there is one node).
 */
export class ProcessKubelet {
  private readonly pods = new Map<string, Map<string, Running>>();
  private readonly unobserve: () => void;
  private closed = false;

  constructor(
    private readonly fake: FakeKubernetes,
    private readonly options: ProcessKubeletOptions,
  ) {
    fake.onPodCreated = (pod) => void this.run(pod.metadata.name);
    fake.onPodTerminating = (pod, finished) => void this.terminate(pod, finished);
    // a claim's volume is deleted with it (reclaimPolicy Delete)
    this.unobserve = fake.observe((resource, type, object) => {
      if (resource === 'persistentvolumeclaims' && type === 'DELETED')
        rmSync(this.volume(object.metadata.name), { recursive: true, force: true });
    });
  }

  /** The directory holding a claim's volume. */
  volume(claim: string): string {
    return join(this.options.volumes, claim);
  }

  /** The running process of a container (to kill it, as a crash would). */
  process(pod: string, container: string): ChildProcess | undefined {
    return this.pods.get(pod)?.get(container)?.child;
  }

  /** What a container wrote to stderr, for a failing test to show. */
  logs(pod: string): string {
    return [...(this.pods.get(pod)?.entries() ?? [])]
      .map(([name, running]) => `[${name}] ${running.stderr}`)
      .join('\n');
  }

  async close(): Promise<void> {
    this.closed = true;
    this.unobserve();
    this.fake.onPodCreated = undefined;
    this.fake.onPodTerminating = undefined;
    await Promise.all([...this.pods.keys()].map((pod) => this.kill(pod, 0)));
  }

  private async run(name: string): Promise<void> {
    await sleep(20);
    const pod = this.fake.get('pods', name);
    if (this.closed || !pod || pod.metadata.deletionTimestamp) return;
    const unknown = pod.spec.containers.find((container: Json) => !this.options.images[container.image]);
    if (unknown) {
      this.fake.podWaiting(name, 'ErrImagePull', `failed to pull and unpack image "${unknown.image}": not found`);
      await sleep(50);
      if (this.fake.get('pods', name))
        this.fake.podWaiting(name, 'ImagePullBackOff', `Back-off pulling image "${unknown.image}"`);
      return;
    }
    // the scheduler places a pod only once its claims exist
    for (;;) {
      const missing = (pod.spec.volumes ?? []).find(
        (volume: Json) =>
          volume.persistentVolumeClaim &&
          !this.fake.get('persistentvolumeclaims', volume.persistentVolumeClaim.claimName),
      );
      if (!missing) break;
      if (!this.fake.get('pods', name)) return;
      this.fake.podUnschedulable(
        name,
        `0/1 nodes are available: persistentvolumeclaim "${missing.persistentVolumeClaim.claimName}" not found.`,
      );
      await sleep(100);
    }
    const envs: Record<string, string>[] = [];
    for (const container of pod.spec.containers) {
      const env = this.environment(pod, container);
      if (typeof env === 'string') return this.fake.podWaiting(name, 'CreateContainerConfigError', env);
      envs.push(env);
    }
    const podIP = `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
    this.fake.podRunning(name, { podIP, ready: false });
    const running = new Map<string, Running>();
    this.pods.set(name, running);
    pod.spec.containers.forEach((container: Json, at: number) =>
      running.set(container.name, this.start(pod, container, envs[at]!, podIP)),
    );
    for (const [container, process] of running) {
      void process.exited.then((code) => {
        // a container that ends on its own (restartPolicy Never: for good)
        if (
          this.pods.get(name) === running &&
          this.fake.get('pods', name) &&
          !this.fake.get('pods', name).metadata.deletionTimestamp
        ) {
          this.fake.containerTerminated(name, container, {
            reason: code === 0 ? 'Completed' : 'Error',
            exitCode: code,
          });
        }
      });
    }
    await Promise.all(pod.spec.containers.map((container: Json) => this.probe(name, container, podIP)));
    const now = this.fake.get('pods', name);
    if (
      now?.status?.phase === 'Running' &&
      !now.metadata.deletionTimestamp &&
      now.status.containerStatuses.every((status: Json) => status.state?.running)
    ) {
      this.fake.podRunning(name, { podIP, ready: true });
    }
  }

  /** The container's environment from the pod spec, or why the kubelet cannot make it. */
  private environment(pod: Json, container: Json): Record<string, string> | string {
    const env: Record<string, string> = {};
    for (const variable of container.env ?? []) {
      const ref = variable.valueFrom?.secretKeyRef;
      if (!ref) {
        env[variable.name] = variable.value ?? '';
        continue;
      }
      const values = this.fake.secretValues(ref.name);
      if (!values) return `secret "${ref.name}" not found`;
      if (values[ref.key] === undefined)
        return `couldn't find key ${ref.key} in Secret ${pod.metadata.namespace}/${ref.name}`;
      env[variable.name] = values[ref.key]!;
    }
    return env;
  }

  private start(pod: Json, container: Json, env: Record<string, string>, podIP: string): Running {
    const image = this.options.images[container.image]!;
    const context = { ...pod.spec.securityContext, ...container.securityContext };
    const args = ['--unshare-all', '--share-net', '--die-with-parent', '--new-session'];
    if (context.runAsUser !== undefined)
      args.push(
        '--unshare-user',
        '--uid',
        String(context.runAsUser),
        '--gid',
        String(context.runAsGroup ?? context.runAsUser),
      );
    if ((context.capabilities?.drop ?? []).includes('ALL')) args.push('--cap-drop', 'ALL');
    args.push('--clearenv');
    for (const [key, value] of Object.entries({ PATH, ...image.env, ...env })) args.push('--setenv', key, value);
    args.push('--proc', '/proc', '--dev', '/dev', ...systemRootArgs(ETC));
    for (const bind of image.binds) args.push('--ro-bind', bind.source, bind.target);
    for (const mount of container.volumeMounts ?? []) {
      const volume = pod.spec.volumes.find((v: Json) => v.name === mount.name);
      if (volume.persistentVolumeClaim) {
        const dir = this.volume(volume.persistentVolumeClaim.claimName);
        // provisioned on first use, as mkfs.ext4 leaves a new volume: lost+found at its root
        if (!existsSync(dir)) mkdirSync(join(dir, 'lost+found'), { recursive: true, mode: 0o700 });
        // a subPath as the kubelet mounts it: made if missing, and never through a link that leaves the volume
        let source = dir;
        if (mount.subPath) {
          source = join(dir, mount.subPath);
          if (!existsSync(source)) mkdirSync(source, { recursive: true });
          const real = realpathSync(source);
          if (real !== realpathSync(dir) && !real.startsWith(`${realpathSync(dir)}/`))
            throw new Error(`subPath ${mount.subPath} leaves the volume`);
        }
        args.push(mount.readOnly ? '--ro-bind' : '--bind', source, mount.mountPath);
      } else if (volume.emptyDir) {
        args.push('--tmpfs', mount.mountPath, ...(mount.readOnly ? ['--remount-ro', mount.mountPath] : []));
      }
    }
    if (container.workingDir) args.push('--chdir', container.workingDir);
    if (context.readOnlyRootFilesystem) args.push('--remount-ro', '/');
    const command = [...(image.entrypoint ?? []), ...(container.command ?? []), ...(container.args ?? [])];
    const child = spawn(
      '/usr/bin/bwrap',
      [...args, '--', ...(this.options.args ? this.options.args(command, podIP) : command)],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
        detached: true,
      },
    );
    const running: Running = {
      child,
      stderr: '',
      exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? 137 : 1)))),
    };
    child.stderr!.on(
      'data',
      (chunk: Buffer) => (running.stderr = (running.stderr + chunk.toString('utf8')).slice(-4000)),
    );
    child.on('error', () => undefined);
    return running;
  }

  /** The container's TCP readiness probe, tried until it connects or the pod is no longer running. */
  private async probe(name: string, container: Json, podIP: string): Promise<void> {
    const probe = container.readinessProbe?.tcpSocket;
    if (!probe) return;
    const port =
      typeof probe.port === 'number'
        ? probe.port
        : container.ports?.find((p: Json) => p.name === probe.port)?.containerPort;
    for (;;) {
      const pod = this.fake.get('pods', name);
      if (this.closed || pod?.status?.phase !== 'Running' || pod.metadata.deletionTimestamp) return;
      const open = await new Promise<boolean>((resolve) => {
        const socket = connect({ host: podIP, port }, () => {
          socket.destroy();
          resolve(true);
        });
        socket.on('error', () => resolve(false));
      });
      if (open) return;
      await sleep(50);
    }
  }

  /** The pod was deleted: its containers get SIGTERM, then SIGKILL after the grace period (here at most 2 s); then it is gone. */
  private async terminate(pod: Json, finished: () => void): Promise<void> {
    await this.kill(pod.metadata.name, Math.min(2000, (pod.metadata.deletionGracePeriodSeconds ?? 30) * 1000));
    finished();
  }

  private async kill(name: string, graceMs: number): Promise<void> {
    const running = this.pods.get(name);
    this.pods.delete(name);
    if (!running) return;
    await Promise.all(
      [...running.values()].map(async ({ child, exited }) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        // bubblewrap's own process: its death takes the container's whole pid namespace with it (--die-with-parent)
        signal(child, graceMs > 0 ? 'SIGTERM' : 'SIGKILL');
        const timer = setTimeout(() => signal(child, 'SIGKILL'), graceMs);
        await exited;
        clearTimeout(timer);
      }),
    );
  }
}

function signal(child: ChildProcess, name: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, name);
  } catch {
    // gone
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
