import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PersistentVolumeClaim, Pod, Secret } from 'kubernetes-models/v1';

/**
 * A stand-in for the Kubernetes API server, for drivers that cannot meet a
 * real one here. It speaks the real REST paths over TLS with a bearer token,
 * and refuses what a real API server refuses: objects that fail the
 * Kubernetes OpenAPI schemas (via kubernetes-models), bad names, labels and
 * Secret keys, pods the `restricted` Pod Security Standard would not admit,
 * duplicates. Its kubelet can be scripted (or left to run pods itself, TCP
 * readiness probes included), and deleting a Pod garbage-collects the objects
 * it owns, as the real garbage collector does.
 *
 * Served: pods, secrets, persistentvolumeclaims (core/v1) and networkpolicies
 * (networking.k8s.io/v1), create, read, list (equality label selectors),
 * replace (PUT), merge patch, delete, and
 * watch as the real API server answers it: a list request with `watch=true`
 * (or `1`) gets a chunked stream of JSON lines `{"type":"ADDED"|"MODIFIED"|
 * "DELETED","object":…}`, each object with its new resourceVersion; from a
 * `resourceVersion` it replays what changed since, and from one older than
 * the kept history it sends an ERROR event with a 410 Expired Status and
 * ends, so the client lists again. Tests can end watches (as the server's
 * timeout does), stall them (a partition) and compact the history.
 *
 * A claim is Bound as soon as it is made; deleting one that a pod still
 * mounts leaves it Terminating until that pod is gone (the
 * kubernetes.io/pvc-protection finalizer).
 */

export type Resource = 'pods' | 'secrets' | 'persistentvolumeclaims' | 'networkpolicies';

/** Objects as the API server stores them: free-form JSON. */
type Json = any;

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  contentType: string | undefined;
  body: Json;
}

export interface FakeKubelet {
  /** the IP every pod gets; 127.0.0.1 makes a pod's port a port on this machine */
  podIP: string;
  /** images whose pull fails (ErrImagePull, then ImagePullBackOff) */
  unpullable?: Set<string>;
  /** from creation to the container running */
  startDelayMs?: number;
}

type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface WatchEvent {
  revision: number;
  type: WatchEventType;
  resource: Resource;
  object: Json;
}

interface Watcher {
  resource: Resource;
  matches: (labels: Record<string, string>) => boolean;
  res: ServerResponse;
  /** partitioned: the connection stays open, but nothing reaches the client */
  stalled: boolean;
}

export interface Refusal {
  method?: string;
  /** the RBAC verb instead of the method: get, list, watch, create, patch, delete */
  verb?: string;
  resource: Resource;
  code: number;
  reason: string;
  message: string;
}

const KINDS: Record<Resource, { apiVersion: string; kind: string; base: string; validate(obj: Json): void }> = {
  pods: { apiVersion: 'v1', kind: 'Pod', base: '/api/v1', validate: (obj) => new Pod(obj).validate() },
  secrets: { apiVersion: 'v1', kind: 'Secret', base: '/api/v1', validate: (obj) => new Secret(obj).validate() },
  persistentvolumeclaims: {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    base: '/api/v1',
    validate: (obj) => new PersistentVolumeClaim(obj).validate(),
  },
  networkpolicies: {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    base: '/apis/networking.k8s.io/v1',
    validate: (obj) => new NetworkPolicy(obj).validate(),
  },
};

const PATH =
  /^\/(api\/v1|apis\/networking\.k8s\.io\/v1)\/namespaces\/([^/]+)\/(pods|secrets|persistentvolumeclaims|networkpolicies)(?:\/([^/]+))?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;
const IANA_SVC_NAME = /^(?=.*[a-z])[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;
const RESTRICTED_VOLUMES = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);
const MERGE_PATCH = new Set(['application/merge-patch+json', 'application/strategic-merge-patch+json']);

export class FakeKubernetes {
  readonly requests: RecordedRequest[] = [];
  /** called after a pod is stored, to script what the kubelet does with it */
  onPodCreated: ((pod: Json) => void) | undefined;
  /**
   * Called when a running pod is deleted (it is Terminating): the kubelet
   * stops its containers and calls `finished`, and only then is the pod gone.
   * Unset, a running pod goes 30 ms after its deletion.
   */
  onPodTerminating: ((pod: Json, finished: () => void) => void) | undefined;
  private readonly observers = new Set<(resource: Resource, type: WatchEventType, object: Json) => void>();
  private readonly store = new Map<string, Json>();
  private readonly refusals: Refusal[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private revision = 1;
  /** every change since `compactedAt`, oldest first, as watches replay them */
  private history: WatchEvent[] = [];
  private compactedAt = 0;
  private readonly watchers = new Set<Watcher>();

  private constructor(
    private readonly server: Server,
    readonly url: string,
    private readonly caPem: string,
    readonly namespace: string,
    readonly token: string,
    private readonly kubelet: FakeKubelet | undefined,
  ) {}

  static async start(options: { namespace?: string; kubelet?: FakeKubelet } = {}): Promise<FakeKubernetes> {
    const { key, cert } = selfSignedCertificate();
    let fake: FakeKubernetes | undefined;
    const server = createServer({ key, cert }, (req, res) => void fake!.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address() as { port: number };
    fake = new FakeKubernetes(
      server,
      `https://127.0.0.1:${address.port}`,
      cert,
      options.namespace ?? 'aileron-pool',
      randomBytes(16).toString('hex'),
      options.kubelet,
    );
    return fake;
  }

  /** What a control plane would load from its kubeconfig: this server, its CA, a service-account token. */
  kubeConfig(token = this.token): KubeConfig {
    const config = new KubeConfig();
    config.loadFromOptions({
      clusters: [
        { name: 'fake', server: this.url, caData: Buffer.from(this.caPem).toString('base64'), skipTLSVerify: false },
      ],
      users: [{ name: 'control-plane', token }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'control-plane', namespace: this.namespace }],
      currentContext: 'fake',
    });
    return config;
  }

  async close(): Promise<void> {
    for (const timer of this.timers) clearTimeout(timer);
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  get(resource: Resource, name: string): Json | undefined {
    const obj = this.store.get(key(resource, name));
    return obj === undefined ? undefined : structuredClone(obj);
  }

  names(resource: Resource): string[] {
    return [...this.store.keys()].filter((k) => k.startsWith(`${resource}/`)).map((k) => k.slice(resource.length + 1));
  }

  /** A Secret's values as the container would see them (decoded `data`). */
  secretValues(name: string): Record<string, string> | undefined {
    const secret = this.store.get(key('secrets', name));
    if (!secret) return undefined;
    return Object.fromEntries(
      Object.entries((secret.data ?? {}) as Record<string, string>).map(([k, v]) => [
        k,
        Buffer.from(v, 'base64').toString('utf8'),
      ]),
    );
  }

  /**
   * Every later request of this method on this resource gets this answer, as
   * RBAC or an admission webhook would give it, until the returned function
   * lifts the refusal.
   */
  refuse(refusal: Refusal): () => void {
    this.refusals.push(refusal);
    return () => {
      const at = this.refusals.indexOf(refusal);
      if (at >= 0) this.refusals.splice(at, 1);
    };
  }

  // --- watches, for tests to disturb ---

  /** Watches open now. */
  get openWatches(): number {
    return this.watchers.size;
  }

  /** Ends every open watch, as the API server does when a watch's timeout is up; clients resume from their resourceVersion. */
  endWatches(): void {
    for (const watcher of [...this.watchers]) {
      this.watchers.delete(watcher);
      watcher.res.end();
    }
  }

  /** From now on nothing reaches the watches open now, though their connections stay up (a partition). */
  stallWatches(): void {
    for (const watcher of this.watchers) watcher.stalled = true;
  }

  /** Forgets the history, as etcd's compaction does: a watch from an earlier resourceVersion gets 410 Expired. */
  compact(): void {
    this.history = [];
    this.compactedAt = this.revision;
  }

  // --- the kubelet's side, for tests to script ---

  podWaiting(name: string, reason: string, message?: string): void {
    this.setPodStatus(name, (pod) => ({
      phase: 'Pending',
      conditions: [{ type: 'PodScheduled', status: 'True' }],
      containerStatuses: containerNames(pod).map((container) => ({
        name: container,
        image: imageOf(pod, container),
        imageID: '',
        ready: false,
        restartCount: 0,
        state: { waiting: { reason, ...(message ? { message } : {}) } },
      })),
    }));
  }

  podUnschedulable(name: string, message: string): void {
    this.setPodStatus(name, () => ({
      phase: 'Pending',
      conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message }],
    }));
  }

  podRunning(name: string, options: { podIP: string; ready: boolean }): void {
    this.setPodStatus(name, (pod) => ({
      phase: 'Running',
      podIP: options.podIP,
      podIPs: [{ ip: options.podIP }],
      startTime: timestamp(),
      conditions: [
        { type: 'PodScheduled', status: 'True' },
        { type: 'Initialized', status: 'True' },
        { type: 'ContainersReady', status: options.ready ? 'True' : 'False' },
        { type: 'Ready', status: options.ready ? 'True' : 'False' },
      ],
      containerStatuses: containerNames(pod).map((container) => ({
        name: container,
        image: imageOf(pod, container),
        imageID: '',
        ready: options.ready,
        started: true,
        restartCount: 0,
        state: { running: { startedAt: timestamp() } },
      })),
    }));
  }

  podTerminated(
    name: string,
    options: { phase: 'Failed' | 'Succeeded'; reason: string; exitCode: number; message?: string },
  ): void {
    this.setPodStatus(name, (pod) => ({
      phase: options.phase,
      podIP: pod.status?.podIP,
      conditions: [{ type: 'Ready', status: 'False', reason: 'PodFailed' }],
      containerStatuses: containerNames(pod).map((container) => ({
        name: container,
        image: imageOf(pod, container),
        imageID: '',
        ready: false,
        restartCount: 0,
        state: {
          terminated: {
            reason: options.reason,
            exitCode: options.exitCode,
            ...(options.message ? { message: options.message } : {}),
            startedAt: timestamp(),
            finishedAt: timestamp(),
          },
        },
      })),
    }));
  }

  /** One container of a pod ended; the pod's phase follows once all have (restartPolicy Never), until then it is Running and not Ready. */
  containerTerminated(name: string, container: string, options: { reason: string; exitCode: number }): void {
    this.setPodStatus(name, (pod) => {
      const statuses = (pod.status?.containerStatuses ?? []).map((status: Json) =>
        status.name !== container
          ? status
          : {
              ...status,
              ready: false,
              started: false,
              state: {
                terminated: {
                  reason: options.reason,
                  exitCode: options.exitCode,
                  startedAt: timestamp(),
                  finishedAt: timestamp(),
                },
              },
            },
      );
      const all = statuses.every((status: Json) => status.state?.terminated);
      const failed = statuses.some((status: Json) => (status.state?.terminated?.exitCode ?? 0) !== 0);
      return {
        ...pod.status,
        phase: all ? (failed ? 'Failed' : 'Succeeded') : pod.status?.phase,
        conditions: (pod.status?.conditions ?? []).map((condition: Json) =>
          condition.type === 'Ready' || condition.type === 'ContainersReady'
            ? { ...condition, status: 'False' }
            : condition,
        ),
        containerStatuses: statuses,
      };
    });
  }

  /** Every change to any object from now on, as a watch would see it, until the returned function is called. */
  observe(listener: (resource: Resource, type: WatchEventType, object: Json) => void): () => void {
    this.observers.add(listener);
    return () => this.observers.delete(listener);
  }

  /** As `kubectl delete pod` by someone else: gone at once, its dependents collected. */
  deletePod(name: string): void {
    this.remove('pods', name);
  }

  private setPodStatus(name: string, status: (pod: Json) => Json): void {
    const pod = this.store.get(key('pods', name));
    if (!pod) throw new Error(`fake kubelet: no pod ${name}`);
    const next = { ...pod, status: status(pod) };
    // the kubelet's writes pass the same schema as anyone's
    new Pod(next).validate();
    next.metadata = { ...pod.metadata, resourceVersion: String(++this.revision) };
    this.store.set(key('pods', name), next);
    this.changed('pods', 'MODIFIED', next);
  }

  /**
   * The kubelet when a test does not script it: pulls (or fails to), refuses
   * to start without the Secret the pod takes its env from, then runs the
   * container and marks it Ready once its TCP readiness probe connects.
   */
  private runPod(name: string, kubelet: FakeKubelet): void {
    this.later(kubelet.startDelayMs ?? 20, () => {
      const pod = this.store.get(key('pods', name));
      if (!pod || pod.metadata.deletionTimestamp) return;
      const container = pod.spec.containers[0];
      if (kubelet.unpullable?.has(container.image)) {
        this.podWaiting(name, 'ErrImagePull', `failed to pull and unpack image "${container.image}": not found`);
        this.later(50, () => {
          if (this.store.has(key('pods', name)))
            this.podWaiting(name, 'ImagePullBackOff', `Back-off pulling image "${container.image}"`);
        });
        return;
      }
      for (const source of container.envFrom ?? []) {
        if (source.secretRef && !source.secretRef.optional && !this.store.has(key('secrets', source.secretRef.name))) {
          this.podWaiting(name, 'CreateContainerConfigError', `secret "${source.secretRef.name}" not found`);
          return;
        }
      }
      this.podRunning(name, { podIP: kubelet.podIP, ready: false });
      const probe = container.readinessProbe?.tcpSocket;
      if (!probe) return this.podRunning(name, { podIP: kubelet.podIP, ready: true });
      const port =
        typeof probe.port === 'number'
          ? probe.port
          : container.ports?.find((p: Json) => p.name === probe.port)?.containerPort;
      const attempt = (): void => {
        if (!this.store.has(key('pods', name)) || this.store.get(key('pods', name)).status?.phase !== 'Running') return;
        const socket = connect({ host: kubelet.podIP, port }, () => {
          socket.destroy();
          if (this.store.get(key('pods', name))?.status?.phase === 'Running')
            this.podRunning(name, { podIP: kubelet.podIP, ready: true });
        });
        socket.on('error', () => this.later(50, attempt));
      };
      attempt();
    });
  }

  private later(ms: number, run: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      run();
    }, ms);
    this.timers.add(timer);
  }

  // --- the API ---

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.url);
    const raw = await readBody(req);
    const contentType = req.headers['content-type']?.split(';')[0]?.trim();
    let body: Json;
    try {
      body = raw.length > 0 ? JSON.parse(raw) : undefined;
    } catch {
      return send(res, 400, status(400, 'BadRequest', 'the request body is not JSON'));
    }
    this.requests.push({ method: req.method ?? '', path: url.pathname, query: url.searchParams, contentType, body });

    if (req.headers.authorization !== `Bearer ${this.token}`)
      return send(res, 401, status(401, 'Unauthorized', 'Unauthorized'));
    const match = PATH.exec(url.pathname);
    const resource = match?.[3] as Resource | undefined;
    if (!match || !resource || `/${match[1]}` !== KINDS[resource].base) {
      return send(res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
    }
    const namespace = match[2]!;
    const name = match[4] ? decodeURIComponent(match[4]) : undefined;
    const method = req.method ?? 'GET';
    const verb = verbOf(method, name !== undefined, url.searchParams.get('watch'));
    const refusal = this.refusals.find(
      (r) => r.resource === resource && (!r.method || r.method === method) && (!r.verb || r.verb === verb),
    );
    if (refusal) return send(res, refusal.code, status(refusal.code, refusal.reason, refusal.message));
    if (namespace !== this.namespace) {
      return send(
        res,
        404,
        status(404, 'NotFound', `namespaces "${namespace}" not found`, { name: namespace, kind: 'namespaces' }),
      );
    }

    if (name === undefined && method === 'POST') return this.create(res, resource, contentType, body);
    if (verb === 'watch') return this.watch(res, resource, url.searchParams);
    if (name === undefined && method === 'GET') return this.list(res, resource, url.searchParams.get('labelSelector'));
    if (name === undefined)
      return send(res, 405, status(405, 'MethodNotAllowed', `${method} is not supported on ${resource}`));

    const stored = this.store.get(key(resource, name));
    if (!stored)
      return send(res, 404, status(404, 'NotFound', `${resource} "${name}" not found`, { name, kind: resource }));
    if (method === 'GET') return send(res, 200, stored);
    if (method === 'PATCH') return this.patch(res, resource, name, stored, contentType, body);
    if (method === 'PUT') return this.replace(res, resource, name, stored, contentType, body);
    if (method === 'DELETE')
      return this.delete(res, resource, name, stored, url.searchParams.get('gracePeriodSeconds'));
    return send(res, 405, status(405, 'MethodNotAllowed', `${method} is not supported on ${resource}`));
  }

  private create(res: ServerResponse, resource: Resource, contentType: string | undefined, body: Json): void {
    const kind = KINDS[resource];
    if (contentType !== 'application/json')
      return send(
        res,
        415,
        status(415, 'UnsupportedMediaType', `the body of the request was in an unknown format: ${contentType}`),
      );
    if (typeof body !== 'object' || body === null || body.kind !== kind.kind || body.apiVersion !== kind.apiVersion) {
      return send(res, 400, status(400, 'BadRequest', `the body is not a ${kind.apiVersion} ${kind.kind}`));
    }
    const meta = body.metadata ?? {};
    if (meta.namespace !== undefined && meta.namespace !== this.namespace) {
      return send(
        res,
        400,
        status(
          400,
          'BadRequest',
          'the namespace of the provided object does not match the namespace sent on the request',
        ),
      );
    }
    const name: string | undefined = meta.name;
    const invalid = this.invalid(resource, body);
    if (invalid)
      return send(
        res,
        422,
        status(422, 'Invalid', `${kind.kind} "${name ?? ''}" is invalid: ${invalid}`, { name, kind: resource }),
      );
    if (resource === 'pods') {
      const violations = restrictedViolations(body);
      if (violations.length > 0) {
        return send(
          res,
          403,
          status(
            403,
            'Forbidden',
            `pods "${name}" is forbidden: violates PodSecurity "restricted:latest": ${violations.join(', ')}`,
          ),
        );
      }
    }
    if (this.store.has(key(resource, name!))) {
      return send(
        res,
        409,
        status(409, 'AlreadyExists', `${resource} "${name}" already exists`, { name, kind: resource }),
      );
    }
    const stored: Json = structuredClone(body);
    stored.metadata = {
      ...meta,
      namespace: this.namespace,
      uid: randomUUID(),
      resourceVersion: String(++this.revision),
      creationTimestamp: timestamp(),
    };
    if (resource === 'secrets') {
      // as the API server does: stringData is write-only, folded into data
      const data: Record<string, string> = { ...(stored.data ?? {}) };
      for (const [k, v] of Object.entries((stored.stringData ?? {}) as Record<string, string>))
        data[k] = Buffer.from(v, 'utf8').toString('base64');
      delete stored.stringData;
      stored.data = data;
      stored.type ??= 'Opaque';
    }
    if (resource === 'pods') stored.status = { phase: 'Pending', qosClass: 'Guaranteed' };
    // bound at once, as by a provisioner that never waits for the first consumer
    if (resource === 'persistentvolumeclaims')
      stored.status = {
        phase: 'Bound',
        accessModes: stored.spec.accessModes,
        capacity: { storage: stored.spec.resources?.requests?.storage },
      };
    this.store.set(key(resource, name!), stored);
    this.changed(resource, 'ADDED', stored);
    send(res, 201, stored);
    if (resource === 'pods') {
      if (this.onPodCreated) this.onPodCreated(structuredClone(stored));
      else if (this.kubelet) this.runPod(name!, this.kubelet);
    }
  }

  private list(res: ServerResponse, resource: Resource, selector: string | null): void {
    const matches = labelMatcher(selector ?? '');
    const items = this.names(resource)
      .map((name) => this.store.get(key(resource, name)))
      .filter((obj) => matches(obj.metadata.labels ?? {}));
    send(res, 200, {
      kind: `${KINDS[resource].kind}List`,
      apiVersion: KINDS[resource].apiVersion,
      metadata: { resourceVersion: String(this.revision) },
      items,
    });
  }

  /**
   * Without a resourceVersion (or with "0"), the objects there are now as
   * ADDED, then every change; with one, every change after it, or 410 Expired
   * when the history no longer reaches back that far.
   */
  private watch(res: ServerResponse, resource: Resource, query: URLSearchParams): void {
    const matches = labelMatcher(query.get('labelSelector') ?? '');
    const from = query.get('resourceVersion') ?? '';
    if (from !== '' && !/^\d+$/.test(from))
      return send(res, 400, status(400, 'BadRequest', `invalid resource version: ${from}`));
    res.writeHead(200, { 'content-type': 'application/json' });
    // a client waits for the headers before it reads events, and there may be none for a while
    res.flushHeaders();
    if (from !== '' && from !== '0' && Number(from) < this.compactedAt) {
      const expired = status(410, 'Expired', `too old resource version: ${from} (${this.compactedAt})`);
      res.end(`${JSON.stringify({ type: 'ERROR', object: expired })}\n`);
      return;
    }
    const watcher: Watcher = { resource, matches, res, stalled: false };
    if (from === '' || from === '0') {
      for (const name of this.names(resource)) {
        const obj = this.store.get(key(resource, name));
        if (matches(obj.metadata.labels ?? {})) writeEvent(watcher, 'ADDED', obj);
      }
    } else {
      for (const event of this.history) {
        if (event.revision > Number(from) && event.resource === resource && matches(event.object.metadata.labels ?? {}))
          writeEvent(watcher, event.type, event.object);
      }
    }
    this.watchers.add(watcher);
    res.on('close', () => this.watchers.delete(watcher));
    const timeout = Number(query.get('timeoutSeconds'));
    if (timeout > 0) {
      this.later(timeout * 1000, () => {
        this.watchers.delete(watcher);
        res.end();
      });
    }
  }

  /** Records a change, which `object` carries the resourceVersion of, and tells the watches of its resource. */
  private changed(resource: Resource, type: WatchEventType, object: Json): void {
    const event: WatchEvent = {
      revision: Number(object.metadata.resourceVersion),
      type,
      resource,
      object: structuredClone(object),
    };
    this.history.push(event);
    for (const observer of this.observers) observer(resource, type, structuredClone(object));
    for (const watcher of this.watchers) {
      if (watcher.resource === resource && !watcher.stalled && watcher.matches(event.object.metadata.labels ?? {}))
        writeEvent(watcher, type, event.object);
    }
  }

  private patch(
    res: ServerResponse,
    resource: Resource,
    name: string,
    stored: Json,
    contentType: string | undefined,
    body: Json,
  ): void {
    if (!contentType || !MERGE_PATCH.has(contentType)) {
      return send(
        res,
        415,
        status(
          415,
          'UnsupportedMediaType',
          `the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json`,
        ),
      );
    }
    const next = mergePatch(structuredClone(stored), body);
    for (const field of ['name', 'namespace', 'uid', 'creationTimestamp'] as const) {
      if (next.metadata?.[field] !== stored.metadata[field]) {
        return send(
          res,
          422,
          status(
            422,
            'Invalid',
            `${KINDS[resource].kind} "${name}" is invalid: metadata.${field}: Invalid value: field is immutable`,
          ),
        );
      }
    }
    if (
      resource === 'secrets' &&
      stored.immutable &&
      (JSON.stringify(next.data) !== JSON.stringify(stored.data) || next.stringData !== undefined)
    ) {
      return send(
        res,
        422,
        status(
          422,
          'Invalid',
          `Secret "${name}" is invalid: data: Forbidden: field is immutable when \`immutable\` is set`,
        ),
      );
    }
    const invalid = this.invalid(resource, next);
    if (invalid)
      return send(res, 422, status(422, 'Invalid', `${KINDS[resource].kind} "${name}" is invalid: ${invalid}`));
    next.metadata.resourceVersion = String(++this.revision);
    this.store.set(key(resource, name), next);
    this.changed(resource, 'MODIFIED', next);
    send(res, 200, next);
  }

  /** PUT: the whole object anew; unconditional without a resourceVersion, else only over that version (409 Conflict). */
  private replace(
    res: ServerResponse,
    resource: Resource,
    name: string,
    stored: Json,
    contentType: string | undefined,
    body: Json,
  ): void {
    const kind = KINDS[resource];
    if (contentType !== 'application/json')
      return send(
        res,
        415,
        status(415, 'UnsupportedMediaType', `the body of the request was in an unknown format: ${contentType}`),
      );
    if (typeof body !== 'object' || body === null || body.kind !== kind.kind || body.apiVersion !== kind.apiVersion) {
      return send(res, 400, status(400, 'BadRequest', `the body is not a ${kind.apiVersion} ${kind.kind}`));
    }
    if (body.metadata?.name !== name)
      return send(res, 400, status(400, 'BadRequest', 'the name of the object does not match the name on the URL'));
    const version = body.metadata?.resourceVersion;
    if (version !== undefined && version !== stored.metadata.resourceVersion) {
      return send(
        res,
        409,
        status(
          409,
          'Conflict',
          `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        ),
      );
    }
    if (resource === 'secrets' && stored.immutable) {
      return send(
        res,
        422,
        status(
          422,
          'Invalid',
          `Secret "${name}" is invalid: data: Forbidden: field is immutable when \`immutable\` is set`,
        ),
      );
    }
    const invalid = this.invalid(resource, body);
    if (invalid) return send(res, 422, status(422, 'Invalid', `${kind.kind} "${name}" is invalid: ${invalid}`));
    const next: Json = structuredClone(body);
    next.metadata = {
      ...next.metadata,
      namespace: this.namespace,
      uid: stored.metadata.uid,
      creationTimestamp: stored.metadata.creationTimestamp,
      resourceVersion: String(++this.revision),
    };
    if (stored.status !== undefined) next.status = stored.status;
    this.store.set(key(resource, name), next);
    this.changed(resource, 'MODIFIED', next);
    send(res, 200, next);
  }

  private delete(res: ServerResponse, resource: Resource, name: string, stored: Json, grace: string | null): void {
    if (resource === 'pods' && stored.status?.phase === 'Running' && grace !== '0') {
      if (stored.metadata.deletionTimestamp) return send(res, 200, stored);
      // a running pod stays, terminating, until the kubelet has stopped it
      stored.metadata.deletionTimestamp = timestamp();
      stored.metadata.deletionGracePeriodSeconds = Number(grace ?? 30);
      stored.metadata.resourceVersion = String(++this.revision);
      this.changed('pods', 'MODIFIED', stored);
      const finished = (): void => this.remove('pods', name);
      if (this.onPodTerminating) this.onPodTerminating(structuredClone(stored), finished);
      else this.later(30, finished);
      return send(res, 200, stored);
    }
    if (resource === 'persistentvolumeclaims' && this.mountedBy(name).length > 0) {
      // kubernetes.io/pvc-protection: the claim goes once no pod mounts it
      if (!stored.metadata.deletionTimestamp) {
        stored.metadata.deletionTimestamp = timestamp();
        stored.metadata.finalizers = ['kubernetes.io/pvc-protection'];
        stored.metadata.resourceVersion = String(++this.revision);
        this.changed(resource, 'MODIFIED', stored);
      }
      return send(res, 200, stored);
    }
    this.remove(resource, name);
    send(
      res,
      200,
      resource === 'pods'
        ? stored
        : {
            kind: 'Status',
            apiVersion: 'v1',
            metadata: {},
            status: 'Success',
            details: { name, kind: resource, uid: stored.metadata.uid },
          },
    );
  }

  /** The pods whose volumes name this claim. */
  private mountedBy(claim: string): string[] {
    return this.names('pods').filter((pod) =>
      (this.store.get(key('pods', pod)).spec?.volumes ?? []).some(
        (volume: Json) => volume.persistentVolumeClaim?.claimName === claim,
      ),
    );
  }

  /** Removes an object and, as the garbage collector does, everything it owns. */
  private remove(resource: Resource, name: string): void {
    const obj = this.store.get(key(resource, name));
    if (!obj) return;
    this.store.delete(key(resource, name));
    this.changed(resource, 'DELETED', {
      ...obj,
      metadata: { ...obj.metadata, resourceVersion: String(++this.revision) },
    });
    if (resource === 'pods') {
      // claims deleted while this pod used them go now, unless another pod still does
      for (const claim of this.names('persistentvolumeclaims')) {
        if (
          this.store.get(key('persistentvolumeclaims', claim)).metadata.deletionTimestamp &&
          this.mountedBy(claim).length === 0
        )
          this.remove('persistentvolumeclaims', claim);
      }
    }
    for (const [k, dependent] of [...this.store.entries()]) {
      if ((dependent.metadata.ownerReferences ?? []).some((owner: Json) => owner.uid === obj.metadata.uid)) {
        const [r, n] = k.split('/') as [Resource, string];
        this.remove(r, n);
      }
    }
  }

  /** The API server's validation of an object: schema first, then the checks the schema cannot express. */
  private invalid(resource: Resource, obj: Json): string | undefined {
    try {
      KINDS[resource].validate(obj);
    } catch (error) {
      return (error as Error).message;
    }
    const meta = obj.metadata ?? {};
    if (typeof meta.name !== 'string' || meta.name.length === 0)
      return 'metadata.name: Required value: name or generateName is required';
    if (meta.name.length > 253 || !DNS_SUBDOMAIN.test(meta.name))
      return `metadata.name: Invalid value: "${meta.name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'`;
    for (const [k, v] of Object.entries((meta.labels ?? {}) as Record<string, string>)) {
      if (!qualifiedName(k))
        return `metadata.labels: Invalid value: "${k}": name part must consist of alphanumeric characters, '-', '_' or '.'`;
      if (v.length > 63 || !LABEL_VALUE.test(v))
        return `metadata.labels: Invalid value: "${v}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`;
    }
    for (const k of Object.keys(meta.annotations ?? {}))
      if (!qualifiedName(k)) return `metadata.annotations: Invalid value: "${k}"`;
    for (const owner of meta.ownerReferences ?? []) {
      if (!owner.uid) return 'metadata.ownerReferences.uid: Invalid value: "": uid must not be empty';
    }
    if (resource === 'secrets') {
      for (const k of [...Object.keys(obj.data ?? {}), ...Object.keys(obj.stringData ?? {})]) {
        if (!SECRET_KEY.test(k))
          return `data[${k}]: Invalid value: "${k}": a valid config key must consist of alphanumeric characters, '-', '_' or '.'`;
      }
    }
    if (resource === 'pods') {
      for (const container of obj.spec?.containers ?? []) {
        if (!DNS_LABEL.test(container.name) || container.name.length > 63)
          return `spec.containers.name: Invalid value: "${container.name}"`;
        if (!container.image) return 'spec.containers.image: Required value';
        for (const port of container.ports ?? []) {
          if (port.name !== undefined && (port.name.length > 15 || !IANA_SVC_NAME.test(port.name)))
            return `spec.containers.ports.name: Invalid value: "${port.name}"`;
        }
        for (const [what, resources] of Object.entries(container.resources ?? {}) as [
          string,
          Record<string, string>,
        ][]) {
          if (what === 'requests' && container.resources.limits) {
            for (const [r, q] of Object.entries(resources)) {
              const limit = container.resources.limits[r];
              if (limit !== undefined && quantity(q) > quantity(limit))
                return `spec.containers.resources.requests: Invalid value: "${q}": must be less than or equal to ${r} limit of ${limit}`;
            }
          }
        }
      }
      const volumes = new Set((obj.spec?.volumes ?? []).map((v: Json) => v.name));
      for (const container of obj.spec?.containers ?? []) {
        for (const mount of container.volumeMounts ?? [])
          if (!volumes.has(mount.name)) return `spec.containers.volumeMounts.name: Not found: "${mount.name}"`;
      }
    }
    return undefined;
  }
}

/** What the `restricted` Pod Security Standard says of a pod, in its own words; empty when admitted. */
function restrictedViolations(pod: Json): string[] {
  const spec = pod.spec ?? {};
  const podContext = spec.securityContext ?? {};
  const out: string[] = [];
  if (spec.hostNetwork || spec.hostPID || spec.hostIPC)
    out.push('host namespaces (hostNetwork=true, hostPID=true or hostIPC=true)');
  const badVolumes = (spec.volumes ?? []).filter(
    (v: Json) => !Object.keys(v).some((k) => k !== 'name' && RESTRICTED_VOLUMES.has(k)),
  );
  if (badVolumes.length > 0)
    out.push(`restricted volume types (volumes ${badVolumes.map((v: Json) => `"${v.name}"`).join(', ')})`);
  for (const container of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
    const context = container.securityContext ?? {};
    const name = `container "${container.name}"`;
    if (context.privileged) out.push(`privileged (${name} must not set securityContext.privileged=true)`);
    if (context.allowPrivilegeEscalation !== false)
      out.push(`allowPrivilegeEscalation != false (${name} must set securityContext.allowPrivilegeEscalation=false)`);
    const capabilities = context.capabilities ?? {};
    if (!(capabilities.drop ?? []).includes('ALL'))
      out.push(`unrestricted capabilities (${name} must set securityContext.capabilities.drop=["ALL"])`);
    if ((capabilities.add ?? []).some((c: string) => c !== 'NET_BIND_SERVICE'))
      out.push(`unrestricted capabilities (${name} must not add capabilities beyond NET_BIND_SERVICE)`);
    if ((context.runAsNonRoot ?? podContext.runAsNonRoot) !== true)
      out.push(`runAsNonRoot != true (${name} must set securityContext.runAsNonRoot=true)`);
    if ((context.runAsUser ?? podContext.runAsUser) === 0) out.push(`runAsUser=0 (${name} must not set runAsUser=0)`);
    const seccomp = (context.seccompProfile ?? podContext.seccompProfile)?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost')
      out.push(
        `seccompProfile (${name} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`,
      );
    if ((container.ports ?? []).some((p: Json) => p.hostPort)) out.push(`hostPort (${name} uses hostPort)`);
  }
  return out;
}

function qualifiedName(k: string): boolean {
  const parts = k.split('/');
  if (parts.length > 2) return false;
  const name = parts.at(-1)!;
  const prefix = parts.length === 2 ? parts[0]! : undefined;
  if (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) return false;
  return name.length <= 63 && LABEL_NAME.test(name);
}

/** Equality-based selectors (`a=b`, `a==b`, `a!=b`, `a`, `!a`), as kubectl and the client send them. */
function labelMatcher(selector: string): (labels: Record<string, string>) => boolean {
  const terms = selector
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((term) => {
      const m = /^(!?)([^=!]+?)\s*(?:(!=|==|=)\s*(.*))?$/.exec(term);
      if (!m) throw new Error(`fake kubernetes: unsupported selector term ${term}`);
      return { not: m[1] === '!', key: m[2]!, op: m[3], value: m[4] };
    });
  return (labels) =>
    terms.every(({ not, key: k, op, value }) => {
      if (!op) return not ? !(k in labels) : k in labels;
      return op === '!=' ? labels[k] !== value : labels[k] === value;
    });
}

function quantity(q: string): number {
  const m = /^(\d+(?:\.\d+)?)(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(q);
  if (!m) return Number.NaN;
  const scale: Record<string, number> = {
    m: 1e-3,
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
  };
  return Number(m[1]) * (m[2] ? scale[m[2]]! : 1);
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: Json, patch: Json): Json {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
  const out = typeof target === 'object' && target !== null && !Array.isArray(target) ? target : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function containerNames(pod: Json): string[] {
  return (pod.spec?.containers ?? []).map((c: Json) => c.name);
}

function imageOf(pod: Json, container: string): string {
  return pod.spec.containers.find((c: Json) => c.name === container)?.image ?? '';
}

function key(resource: Resource, name: string): string {
  return `${resource}/${name}`;
}

function timestamp(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function status(code: number, reason: string, message: string, details?: Json): Json {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details ? { details } : {}),
    code,
  };
}

/** The RBAC verb a request needs. */
function verbOf(method: string, named: boolean, watch: string | null): string {
  if (method === 'GET') return named ? 'get' : watch === 'true' || watch === '1' ? 'watch' : 'list';
  return { POST: 'create', PATCH: 'patch', PUT: 'update', DELETE: 'delete' }[method] ?? method.toLowerCase();
}

function writeEvent(watcher: Watcher, type: WatchEventType, object: Json): void {
  watcher.res.write(`${JSON.stringify({ type, object })}\n`);
}

function send(res: ServerResponse, code: number, body: Json): void {
  res.writeHead(code, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** A throwaway CA-less certificate for 127.0.0.1: the client verifies it against caData, as against a real cluster's CA. */
function selfSignedCertificate(): { key: string; cert: string } {
  const dir = mkdtempSync(join(tmpdir(), 'fake-kube-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=fake-kubernetes',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
