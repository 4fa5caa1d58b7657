import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CoreV1Api, type V1OwnerReference, type V1Pod } from '@kubernetes/client-node';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Pod } from 'kubernetes-models/v1';
import { z } from 'zod';
import { InstanceStartError, type InstanceSpec, type RunningInstance } from '@aileron/pool';
import { KubernetesDriver, type KubernetesDriverOptions } from '@aileron/pool/kubernetes';
import { FakeKubernetes, type FakeKubelet } from '../support/fake-kubernetes';

/**
 * The Kubernetes driver against a fake API server that speaks the real REST
 * API (TLS, bearer token, Status errors) and refuses what a real one would
 * refuse. Its kubelet gives every pod 127.0.0.1, where a real MCP Streamable
 * HTTP server plays the container: it accepts only the token the driver put
 * in the pod's Secret, as the bridge would.
 */

const RUNNER_IMAGE = 'ghcr.io/aileron/mcp-runner:1.4.0';
const UNPULLABLE = 'registry.example.com/mcp/does-not-exist:9.9.9';

let fake: FakeKubernetes;
let container: TestContainer;
let driver: KubernetesDriver;
let logLines: string[];
let canary: string;

beforeEach(async () => {
  canary = `canary-${randomBytes(12).toString('hex')}`;
  container = await startContainer(() => fake);
  fake = await FakeKubernetes.start({ kubelet: kubelet() });
  logLines = [];
  driver = aDriver();
});

afterEach(async () => {
  await driver.close();
  await fake.close();
  await container.close();
  // whatever happened in the test, no credential reached the log
  expect(logLines.join('\n')).not.toContain(canary);
  for (const token of container.tokensSeen) expect(logLines.join('\n')).not.toContain(token);
});

function kubelet(): FakeKubelet {
  return { podIP: '127.0.0.1', unpullable: new Set([UNPULLABLE]) };
}

function aDriver(overrides: Partial<KubernetesDriverOptions> = {}): KubernetesDriver {
  return new KubernetesDriver({
    kubeConfig: fake.kubeConfig(),
    namespace: fake.namespace,
    runnerImage: RUNNER_IMAGE,
    port: container.port,
    startTimeoutMs: 10_000,
    retryIntervalMs: 40,
    log: (line) => logLines.push(line),
    ...overrides,
  });
}

function aSpec(overrides: Partial<InstanceSpec> = {}): InstanceSpec {
  return {
    id: `memory-${randomBytes(6).toString('hex')}`,
    organizationId: randomUUID(),
    organizationSlug: 'acme',
    workspaceId: randomUUID(),
    workspaceSlug: 'platform-team',
    server: 'memory',
    version: '1.2.0',
    run: { kind: 'command', command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'] },
    env: { GITHUB_TOKEN: canary, LOG_LEVEL: 'debug' },
    secrets: [canary],
    limits: { memoryMb: 256, cpuMillis: 250 },
    ...overrides,
  };
}

const pod = (spec: InstanceSpec) => `mcp-${spec.id}`;
const secret = (spec: InstanceSpec) => `mcp-${spec.id}-env`;

/** The driver's reads of pods as a whole: LISTs, and watches (a list request with watch=true). */
function podReads(kind: 'list' | 'watch'): { query: URLSearchParams }[] {
  return fake.requests.filter(
    (r) =>
      r.method === 'GET' &&
      r.path === `/api/v1/namespaces/${fake.namespace}/pods` &&
      (r.query.get('watch') === 'true') === (kind === 'watch'),
  );
}

function leftovers(): string[] {
  return [...fake.names('pods'), ...fake.names('secrets'), ...fake.names('networkpolicies')];
}

async function startError(start: Promise<unknown>): Promise<InstanceStartError> {
  const error = await start.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InstanceStartError);
  return error as InstanceStartError;
}

describe('Kubernetes driver', () => {
  it('starts a pod that an MCP client reaches through the endpoint, with a fresh bearer token per start', async () => {
    const spec = aSpec();
    const instance = await driver.start(spec);
    expect(instance.endpoint.url).toBe(`http://127.0.0.1:${container.port}/mcp`);

    const client = await connect(instance);
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(['whoami']);
    const result = await client.callTool({ name: 'whoami', arguments: { greeting: 'hello' } });
    // the container saw its environment, which came only through the Secret
    expect(result.content).toEqual([{ type: 'text', text: 'hello from LOG_LEVEL=debug HOME=/home/mcp' }]);
    await client.close();
    expect(await instance.healthy()).toBe(true);

    const again = await driver.start(aSpec());
    expect(again.endpoint.headers.authorization).toMatch(/^Bearer [A-Za-z0-9_-]{43}$/);
    expect(again.endpoint.headers.authorization).not.toBe(instance.endpoint.headers.authorization);
  });

  it('creates objects the API server accepts: labelled, limited, locked down, env only in a Secret the Pod owns', async () => {
    const spec = aSpec();
    const instance = await driver.start(spec);
    const stored = fake.get('pods', pod(spec));

    expect(stored.metadata.labels).toEqual({
      'app.kubernetes.io/managed-by': 'aileron',
      'aileron.dev/organization': spec.organizationId,
      'aileron.dev/workspace': spec.workspaceId,
      'aileron.dev/server': 'memory',
      'aileron.dev/instance': spec.id,
    });
    const [c] = stored.spec.containers;
    expect(c.image).toBe(RUNNER_IMAGE);
    expect(c.args).toEqual([
      '--host',
      '0.0.0.0',
      '--port',
      String(container.port),
      '--',
      'npx',
      '-y',
      '@modelcontextprotocol/server-memory',
    ]);
    expect(c.resources.limits).toEqual({ memory: '256Mi', cpu: '250m' });
    expect(c.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(stored.spec).toMatchObject({
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
    });

    // the values live in the Secret; the Pod only names it
    expect(c.env).toBeUndefined();
    expect(c.envFrom).toEqual([{ secretRef: { name: secret(spec) } }]);
    expect(JSON.stringify(stored)).not.toContain(canary);
    const token = instance.endpoint.headers.authorization!.slice('Bearer '.length);
    expect(JSON.stringify(stored)).not.toContain(token);
    expect(fake.secretValues(secret(spec))).toEqual({
      GITHUB_TOKEN: canary,
      LOG_LEVEL: 'debug',
      HOME: '/home/mcp',
      AILERON_BRIDGE_TOKEN: token,
    });

    // owned by the Pod, so the garbage collector takes them with it
    const owner = [{ apiVersion: 'v1', kind: 'Pod', name: pod(spec), uid: stored.metadata.uid }];
    expect(fake.get('secrets', secret(spec)).metadata.ownerReferences).toEqual(owner);
    expect(fake.get('networkpolicies', pod(spec)).metadata.ownerReferences).toEqual(owner);
    expect(fake.get('networkpolicies', pod(spec)).spec.ingress[0].from).toEqual([
      { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'aileron-control-plane' } } },
    ]);
    // the ingress rule exists before the Pod does
    const creates = fake.requests.filter((r) => r.method === 'POST').map((r) => r.path.split('/').at(-1));
    expect(creates).toEqual(['secrets', 'networkpolicies', 'pods']);
  });

  it('fails a start whose image cannot be pulled with the kubelet’s reason, and leaves nothing behind', async () => {
    const began = Date.now();
    const error = await startError(driver.start(aSpec({ run: { kind: 'image', image: UNPULLABLE, args: [] } })));
    expect(error.message).toContain('ImagePullBackOff');
    expect(error.message).toContain(UNPULLABLE);
    expect(error.message).not.toContain(canary);
    // it did not wait out the start timeout
    expect(Date.now() - began).toBeLessThan(5000);
    expect(leftovers()).toEqual([]);
  });

  it('fails a start that never becomes ready within the timeout, saying why the pod waits', async () => {
    fake.onPodCreated = (created) =>
      fake.podUnschedulable(created.metadata.name, '0/3 nodes are available: 3 Insufficient memory.');
    driver = aDriver({ startTimeoutMs: 500 });
    const error = await startError(driver.start(aSpec()));
    expect(error.message).toMatch(
      /not ready within \d+ s \(Unschedulable: 0\/3 nodes are available: 3 Insufficient memory\.\)/,
    );
    expect(leftovers()).toEqual([]);
  });

  it('reports a pod killed for memory through exited, without the container’s own last words, and removes its Secret', async () => {
    const spec = aSpec();
    const instance = await driver.start(spec);
    fake.podTerminated(pod(spec), {
      phase: 'Failed',
      reason: 'OOMKilled',
      exitCode: 137,
      message: `panic: token ${canary}`,
    });

    const exit = await instance.exited;
    expect(exit).toEqual({ reason: 'pod Failed: OOMKilled (exit code 137)', requested: false });
    expect(await instance.healthy()).toBe(false);
    await vi.waitFor(() => expect(leftovers()).toEqual([]), { timeout: 5000 });
  });

  it('notices a pod deleted behind its back, and the garbage collector takes the Secret and NetworkPolicy with it', async () => {
    const spec = aSpec();
    const instance = await driver.start(spec);
    fake.deletePod(pod(spec));
    // collected through the ownerReferences alone, before the driver does anything
    expect(leftovers()).toEqual([]);
    expect(await instance.exited).toEqual({ reason: 'the pod was deleted', requested: false });
  });

  it('stop() deletes the pod, its Secret and its NetworkPolicy, once, however often it is called', async () => {
    const spec = aSpec();
    const instance = await driver.start(spec);
    await Promise.all([instance.stop(), instance.stop()]);
    await instance.stop();

    expect(leftovers()).toEqual([]);
    expect(await instance.exited).toEqual({ reason: 'stopped', requested: true });
    expect(await instance.healthy()).toBe(false);
    const deletes = fake.requests.filter((r) => r.method === 'DELETE');
    expect(deletes.map((r) => r.path.split('/').at(-2)).sort()).toEqual(['networkpolicies', 'pods', 'secrets']);
    expect(deletes.find((r) => r.path.endsWith(`/pods/${pod(spec)}`))!.query.get('gracePeriodSeconds')).toBe('5');
  });

  it('healthy() follows the pod’s readiness', async () => {
    const spec = aSpec();
    const instance = await driver.start(spec);
    expect(await instance.healthy()).toBe(true);
    fake.podRunning(pod(spec), { podIP: '127.0.0.1', ready: false });
    expect(await instance.healthy()).toBe(false);
  });

  it('close() stops every instance the driver started', async () => {
    const [a, b] = await Promise.all([driver.start(aSpec()), driver.start(aSpec({ server: 'github' }))]);
    await driver.close();
    expect(leftovers()).toEqual([]);
    expect(await a.exited).toMatchObject({ requested: true });
    expect(await b.exited).toMatchObject({ requested: true });
    await expect(driver.start(aSpec())).rejects.toBeInstanceOf(InstanceStartError);
  });

  it('turns an RBAC refusal into a clear error and deletes what it had created', async () => {
    fake.refuse({
      method: 'POST',
      resource: 'pods',
      code: 403,
      reason: 'Forbidden',
      message: `pods is forbidden: User "system:serviceaccount:aileron:control-plane" cannot create resource "pods" in API group "" in the namespace "${fake.namespace}"`,
    });
    const error = await startError(driver.start(aSpec()));
    expect(error.message).toContain(
      `could not create the instance's Pod in namespace "${fake.namespace}": Kubernetes answered 403 Forbidden: pods is forbidden`,
    );
    // the Secret and the NetworkPolicy went in before the refusal; they are gone again
    expect(fake.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/secrets'))).toHaveLength(1);
    expect(leftovers()).toEqual([]);
  });

  it('never quotes an answer about the Secret, which an admission webhook may fill with its data', async () => {
    fake.refuse({
      method: 'POST',
      resource: 'secrets',
      code: 403,
      reason: 'Forbidden',
      message: `admission webhook "secrets.policy.example.com" denied the request: GITHUB_TOKEN=${canary} looks like a credential`,
    });
    const error = await startError(driver.start(aSpec()));
    expect(error.message).toContain(
      `could not create the instance's Secret in namespace "${fake.namespace}": Kubernetes answered 403 Forbidden`,
    );
    expect(error.message).not.toContain(canary);
    expect(leftovers()).toEqual([]);
  });

  describe('knowing its own Pod (downward API)', () => {
    const me = { name: 'aileron-control-plane-7d9f8c6b5-x2x4q', uid: randomUUID() };
    const owner = (pod: { name: string; uid: string }): V1OwnerReference => ({
      ...pod,
      apiVersion: 'v1',
      kind: 'Pod',
      controller: false,
      blockOwnerDeletion: false,
    });

    it('makes its Pod the owner of every instance pod, so Kubernetes deletes them when the control plane goes', async () => {
      driver = aDriver({ controlPlanePod: me });
      const spec = aSpec();
      await driver.start(spec);
      const stored = fake.get('pods', pod(spec));
      expect(() => new Pod(stored).validate()).not.toThrow();
      expect(stored.metadata.ownerReferences).toEqual([owner(me)]);
      expect(stored.metadata.labels['aileron.dev/replica']).toBe(me.name);

      // the Secret is the control plane's until the Pod exists, then the Pod's alone, so it still goes with the Pod
      const createdSecret = fake.requests.find((r) => r.method === 'POST' && r.path.endsWith('/secrets'))!;
      expect(createdSecret.body.metadata.ownerReferences).toEqual([owner(me)]);
      const byPod = [{ apiVersion: 'v1', kind: 'Pod', name: pod(spec), uid: stored.metadata.uid }];
      expect(fake.get('secrets', secret(spec)).metadata.ownerReferences).toEqual(byPod);
      expect(fake.get('networkpolicies', pod(spec)).metadata.ownerReferences).toEqual(byPod);
      fake.deletePod(pod(spec));
      expect(leftovers()).toEqual([]);
    });

    it('owns nothing when the control plane runs in another namespace, where an owner would read as gone', async () => {
      driver = aDriver({ controlPlanePod: me, controlPlaneNamespace: 'aileron' });
      const spec = aSpec();
      await driver.start(spec);
      expect(fake.get('pods', pod(spec)).metadata.ownerReferences).toBeUndefined();
      expect(fake.get('pods', pod(spec)).metadata.labels['aileron.dev/replica']).toBe(me.name);
      expect(logLines).toContainEqual(
        expect.stringContaining('is not aileron-pool, so instance pods are not owned by pod'),
      );
    });

    it('deletes at start what an earlier run of its own Pod left, and nothing of another replica or unknown origin', async () => {
      const other = { name: 'aileron-control-plane-7d9f8c6b5-k8p2m', uid: randomUUID() };
      const seeded = {
        // an earlier run of this Pod's container
        mineByOwner: await leftoverPod({ owner: me, replica: me.name }),
        mineByLabel: await leftoverPod({ replica: me.name }),
        // a live replica, one of them with our name (a StatefulSet's earlier pod): the owner decides
        otherReplica: await leftoverPod({ owner: other, replica: other.name }),
        otherWithOurName: await leftoverPod({ owner: other, replica: me.name }),
        // an older release, and a control plane outside the cluster that may still run
        olderRelease: await leftoverPod({}),
        outOfCluster: await leftoverPod({ replica: 'laptop-of-dana' }),
      };
      // a crash between the Secret and the Pod: the Secret is still the control plane's alone
      await core().createNamespacedSecret({
        namespace: fake.namespace,
        body: {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: `${seeded.mineByOwner}-env`, ownerReferences: [owner(me)] },
          stringData: { GITHUB_TOKEN: canary },
        },
      });
      await driver.close();
      fake.requests.length = 0;

      driver = aDriver({ controlPlanePod: me });
      // a start waits for the sweep, so its own new pod is never taken for a leftover
      const spec = aSpec();
      await driver.start(spec);

      const deleted = fake.requests
        .filter((r) => r.method === 'DELETE' && r.path.includes('/pods/'))
        .map((r) => r.path.split('/').at(-1));
      expect(deleted.sort()).toEqual([seeded.mineByOwner, seeded.mineByLabel].sort());
      await vi.waitFor(() =>
        expect(fake.names('pods').sort()).toEqual(
          [pod(spec), seeded.otherReplica, seeded.otherWithOurName, seeded.olderRelease, seeded.outOfCluster].sort(),
        ),
      );
      expect(fake.names('secrets')).toEqual([secret(spec)]);
      expect(logLines).toContain(
        `kubernetes pool: deleted 2 pod(s) an earlier run of this replica left in namespace ${fake.namespace}`,
      );
      expect(logLines.filter((line) => line.includes('warning'))).toEqual([
        expect.stringContaining('warning: 2 pod(s) labelled app.kubernetes.io/managed-by=aileron'),
      ]);
    });

    it('deletes nothing at start when it does not know its Pod, and says how many pods it cannot place', async () => {
      await leftoverPod({ owner: me, replica: me.name });
      await leftoverPod({});
      await driver.close();
      fake.requests.length = 0;
      driver = aDriver();
      await driver.start(aSpec());
      expect(fake.requests.filter((r) => r.method === 'DELETE')).toEqual([]);
      expect(logLines).toContainEqual(
        expect.stringContaining('warning: 1 pod(s) labelled app.kubernetes.io/managed-by=aileron'),
      );
    });
  });

  describe('watching pod status', () => {
    const failed = { phase: 'Failed', reason: 'Error', exitCode: 1 } as const;
    const cannot = (verb: string) =>
      `pods is forbidden: User "system:serviceaccount:aileron:control-plane" cannot ${verb} resource "pods" in API group "" in the namespace "${fake.namespace}"`;

    it('learns of a pod’s readiness and of its end from one watch, reading no pod and listing none again', async () => {
      const spec = aSpec();
      const instance = await driver.start(spec);
      const listed = podReads('list').length;
      fake.podTerminated(pod(spec), failed);

      expect(await instance.exited).toEqual({ reason: 'pod Failed: exited with code 1', requested: false });
      // a driver that read pod status on a timer would have had to read it to know
      expect(podReads('list')).toHaveLength(listed);
      expect(fake.requests.filter((r) => r.method === 'GET' && r.path.endsWith(`/pods/${pod(spec)}`))).toEqual([]);
      const [watch] = podReads('watch');
      expect(watch!.query.get('labelSelector')).toBe('app.kubernetes.io/managed-by=aileron');
      expect(watch!.query.get('resourceVersion')).toMatch(/^[1-9]\d*$/);
    });

    it('resumes a watch the API server ended from where it was, and lists again only when the history is gone (410 Expired)', async () => {
      const [a, b] = [aSpec(), aSpec()];
      const [first, second] = await Promise.all([driver.start(a), driver.start(b)]);
      const listed = podReads('list').length;

      // as at the end of a watch's timeout: what changes before the informer is back is replayed to it
      fake.endWatches();
      fake.podTerminated(pod(a), failed);
      expect(await first.exited).toEqual({ reason: 'pod Failed: exited with code 1', requested: false });
      expect(podReads('list')).toHaveLength(listed);

      // a partition long enough for the history to be compacted: resuming is refused, so it lists again
      await vi.waitFor(() => expect(fake.openWatches).toBe(1));
      fake.stallWatches();
      fake.podTerminated(pod(b), { phase: 'Failed', reason: 'OOMKilled', exitCode: 137 });
      fake.compact();
      fake.endWatches();
      expect(await second.exited).toEqual({ reason: 'pod Failed: OOMKilled (exit code 137)', requested: false });
      expect(podReads('list')).toHaveLength(listed + 1);
      await vi.waitFor(() => expect(leftovers()).toEqual([]));
    });

    it('keeps watching through a refusal, and says so once when it stops working and once when it works again', async () => {
      const spec = aSpec();
      const instance = await driver.start(spec);
      await vi.waitFor(() => expect(fake.openWatches).toBe(1));
      const lift = fake.refuse({
        verb: 'watch',
        resource: 'pods',
        code: 403,
        reason: 'Forbidden',
        message: cannot('watch'),
      });
      const watched = podReads('watch').length;
      fake.endWatches();
      // a few refused attempts
      await vi.waitFor(() => expect(podReads('watch').length).toBeGreaterThan(watched + 2));
      fake.podTerminated(pod(spec), failed);
      lift();

      expect(await instance.exited).toEqual({ reason: 'pod Failed: exited with code 1', requested: false });
      await vi.waitFor(() =>
        expect(logLines).toContain(`kubernetes pool: watching pod status in namespace ${fake.namespace} works again`),
      );
      expect(logLines.filter((line) => line.includes('could not watch'))).toEqual([
        `kubernetes pool: could not watch pod status in namespace ${fake.namespace}, retrying: Kubernetes answered 403 Forbidden`,
      ]);
    });

    it('fails a start it cannot watch with why (a service account without the watch verb), rather than waiting in silence', async () => {
      fake.refuse({ verb: 'watch', resource: 'pods', code: 403, reason: 'Forbidden', message: cannot('watch') });
      driver = aDriver({ startTimeoutMs: 500 });
      const error = await startError(driver.start(aSpec()));
      expect(error.message).toMatch(
        /not ready within \d+ s \(could not watch pod status: Kubernetes answered 403 Forbidden\)$/,
      );
      expect(leftovers()).toEqual([]);
    });
  });

  it('passes on why the API server found an object invalid', async () => {
    // a server name no label value may hold: the catalog never makes one, the API server is the last guard
    const error = await startError(driver.start(aSpec({ server: 'Memory Server!' })));
    expect(error.message).toMatch(/Kubernetes answered 422 Invalid/);
    expect(leftovers()).toEqual([]);
  });

  it('says so when the API server cannot be reached or does not accept its credentials', async () => {
    driver = aDriver({ kubeConfig: fake.kubeConfig('not-the-token') });
    const refused = await startError(driver.start(aSpec()));
    expect(refused.message).toContain('Kubernetes answered 401 Unauthorized');

    const url = fake.url;
    await fake.close();
    fake = await FakeKubernetes.start({ kubelet: kubelet() });
    const config = fake.kubeConfig();
    config.clusters[0] = { ...config.clusters[0]!, server: url };
    driver = aDriver({ kubeConfig: config, startTimeoutMs: 1000 });
    const unreachable = await startError(driver.start(aSpec()));
    expect(unreachable.message).toContain('could not reach the Kubernetes API');
  });
});

function core(): CoreV1Api {
  return fake.kubeConfig().makeApiClient(CoreV1Api);
}

/** A pool pod some control plane made before this test's driver started; answers its name. */
async function leftoverPod(from: { owner?: { name: string; uid: string }; replica?: string }): Promise<string> {
  const instance = `old-${randomBytes(4).toString('hex')}`;
  const body: V1Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `mcp-${instance}`,
      labels: {
        'app.kubernetes.io/managed-by': 'aileron',
        'aileron.dev/instance': instance,
        ...(from.replica ? { 'aileron.dev/replica': from.replica } : {}),
      },
      ...(from.owner
        ? {
            ownerReferences: [
              { apiVersion: 'v1', kind: 'Pod', ...from.owner, controller: false, blockOwnerDeletion: false },
            ],
          }
        : {}),
    },
    spec: {
      containers: [
        {
          name: 'mcp',
          image: RUNNER_IMAGE,
          securityContext: {
            allowPrivilegeEscalation: false,
            runAsNonRoot: true,
            capabilities: { drop: ['ALL'] },
            seccompProfile: { type: 'RuntimeDefault' },
          },
        },
      ],
    },
  };
  await core().createNamespacedPod({ namespace: fake.namespace, body });
  return body.metadata!.name!;
}

async function connect(instance: RunningInstance): Promise<Client> {
  const client = new Client({ name: 'kubernetes-driver-test', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(instance.endpoint.url), {
      requestInit: { headers: instance.endpoint.headers },
    }),
  );
  return client;
}

interface TestContainer {
  port: number;
  /** every bearer token the container accepted, to check none of them leaks */
  tokensSeen: Set<string>;
  close(): Promise<void>;
}

/**
 * Plays every pod's container: an MCP Streamable HTTP server whose
 * environment is the Secret of the pod being called, as envFrom would give
 * it. Like the bridge, it answers only the bearer token in that environment.
 */
async function startContainer(api: () => FakeKubernetes): Promise<TestContainer> {
  const tokensSeen = new Set<string>();
  const server: Server = createServer((req, res) => {
    const presented = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const env = api()
      .names('secrets')
      .map((name) => api().secretValues(name)!)
      .find((values) => presented !== undefined && values.AILERON_BRIDGE_TOKEN === presented);
    if (!env) {
      res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'unauthorized' }));
      return;
    }
    tokensSeen.add(presented!);
    const mcp = new McpServer({ name: 'container', version: '1.0.0' });
    mcp.registerTool(
      'whoami',
      { description: 'Greets with a bit of its environment', inputSchema: { greeting: z.string() } },
      ({ greeting }) => ({
        content: [{ type: 'text', text: `${greeting} from LOG_LEVEL=${env.LOG_LEVEL} HOME=${env.HOME}` }],
      }),
    );
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => void mcp.close());
    void mcp.connect(transport).then(() => transport.handleRequest(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    tokensSeen,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
