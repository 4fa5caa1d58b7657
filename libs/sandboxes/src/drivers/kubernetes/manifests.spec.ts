import { randomBytes, randomUUID } from 'node:crypto';
// The client's own serializer: what it writes on the wire is what the API server validates.
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PersistentVolumeClaim, Pod, Secret } from 'kubernetes-models/v1';
import { describe, expect, it } from 'vitest';
import type { SandboxSpec } from '../driver';
import {
  type RestrictedLayout,
  restrictedNetworkPolicyManifest,
  restrictedPodManifest,
  sandboxManifests,
  sandboxNames,
  type RunnerTokens,
  type SandboxManifestOptions,
} from './manifests';

const TOKENS: RunnerTokens = {
  sandbox: randomBytes(32).toString('base64url'),
  history: randomBytes(32).toString('base64url'),
};
const OPTIONS: SandboxManifestOptions = {
  namespace: 'aileron-sandboxes',
  image: 'ghcr.io/aileron/sandbox-base:0.1.0',
  ports: { sandbox: 7070, history: 7071 },
  storage: { files: '10Gi', history: '2Gi' },
  sandboxResources: { cpu: '1', memory: '2Gi' },
  historyResources: { cpu: '250m', memory: '256Mi' },
  scratchSize: '1Gi',
};

function aSandbox(overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  return {
    id: randomUUID(),
    organizationId: randomUUID(),
    workspaceId: randomUUID(),
    name: 'fix-login-bug',
    network: 'none',
    limits: { memoryMb: 768, cpuSeconds: 600, pids: 256 },
    ...overrides,
  };
}

/** The manifests as JSON on the wire, after the client's serializer (which writes `_from` as `from`, for one). */
function onTheWire(spec: SandboxSpec, options: SandboxManifestOptions = OPTIONS) {
  const manifests = sandboxManifests(spec, TOKENS, options);
  return {
    files: ObjectSerializer.serialize(manifests.files, 'V1PersistentVolumeClaim', ''),
    history: ObjectSerializer.serialize(manifests.history, 'V1PersistentVolumeClaim', ''),
    secret: ObjectSerializer.serialize(manifests.secret, 'V1Secret', ''),
    networkPolicy: ObjectSerializer.serialize(manifests.networkPolicy, 'V1NetworkPolicy', ''),
    pod: ObjectSerializer.serialize(manifests.pod, 'V1Pod', ''),
  };
}

type Mount = { name: string; mountPath: string; readOnly?: boolean };
const container = (pod: { spec: { containers: { name: string }[] } }, name: string) =>
  pod.spec.containers.find((c) => c.name === name) as any;

describe('Kubernetes manifests of a sandbox', () => {
  it('pass the Kubernetes schemas, for either network and with a storage class', () => {
    const cases: [SandboxSpec, SandboxManifestOptions][] = [
      [aSandbox(), OPTIONS],
      [
        aSandbox({ network: 'egress', limits: {} }),
        {
          ...OPTIONS,
          storage: { ...OPTIONS.storage, storageClassName: 'fast-ssd' },
          egressAllowCidrs: ['10.20.0.0/16'],
        },
      ],
    ];
    for (const [spec, options] of cases) {
      const wire = onTheWire(spec, options);
      expect(() => new PersistentVolumeClaim(wire.files).validate()).not.toThrow();
      expect(() => new PersistentVolumeClaim(wire.history).validate()).not.toThrow();
      expect(() => new Secret(wire.secret).validate()).not.toThrow();
      expect(() => new NetworkPolicy(wire.networkPolicy).validate()).not.toThrow();
      expect(() => new Pod(wire.pod).validate()).not.toThrow();
    }
  });

  it('claim the files and the history apart, ReadWriteOnce, in the configured sizes and class', () => {
    const wire = onTheWire(aSandbox(), {
      ...OPTIONS,
      storage: { files: '20Gi', history: '3Gi', storageClassName: 'fast-ssd' },
    });
    expect(wire.files.spec).toEqual({
      accessModes: ['ReadWriteOnce'],
      volumeMode: 'Filesystem',
      resources: { requests: { storage: '20Gi' } },
      storageClassName: 'fast-ssd',
    });
    expect(wire.history.spec.resources.requests.storage).toBe('3Gi');
    expect(onTheWire(aSandbox()).files.spec.storageClassName).toBeUndefined();
  });

  it('lock both containers down as the pool’s pods: non-root, no escalation, no capabilities, read-only root, seccomp, no API token', () => {
    const { pod } = onTheWire(aSandbox());
    expect(pod.spec).toMatchObject({
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      shareProcessNamespace: false,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 10001,
        runAsGroup: 10001,
        fsGroup: 10001,
        seccompProfile: { type: 'RuntimeDefault' },
      },
    });
    expect(pod.spec.containers.map((c: { name: string }) => c.name)).toEqual(['sandbox', 'history']);
    for (const c of pod.spec.containers) {
      expect(c.securityContext).toEqual({
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        runAsNonRoot: true,
        capabilities: { drop: ['ALL'] },
      });
      // the writable places besides the volumes are scratch directories with a size limit
      for (const mount of c.volumeMounts as Mount[]) {
        const volume = pod.spec.volumes.find((v: { name: string }) => v.name === mount.name);
        if (volume.emptyDir) expect(volume.emptyDir.sizeLimit).toBe('1Gi');
      }
    }
    expect(pod.spec.hostNetwork ?? false).toBe(false);
  });

  it('never mount the history in the agent’s container, nor the agent’s files in the history’s', () => {
    const { pod } = onTheWire(aSandbox());
    const sandbox = container(pod, 'sandbox');
    const history = container(pod, 'history');
    const claimOf = (name: string) =>
      pod.spec.volumes.find((v: { name: string }) => v.name === name)?.persistentVolumeClaim?.claimName;
    expect((sandbox.volumeMounts as Mount[]).map((m) => claimOf(m.name)).filter(Boolean)).toEqual([
      expect.stringMatching(/-files$/),
    ]);
    expect(sandbox.volumeMounts).toContainEqual({ name: 'files', mountPath: '/src' });
    expect(sandbox.volumeMounts.some((m: Mount) => m.mountPath.startsWith('/history'))).toBe(false);
    // git there builds commits from what the agent's runner sends: the agent's tree is nothing it can read
    expect((history.volumeMounts as Mount[]).map((m) => claimOf(m.name)).filter(Boolean)).toEqual([
      expect.stringMatching(/-history$/),
    ]);
    expect(history.volumeMounts).toContainEqual({ name: 'history', mountPath: '/history' });
    expect(history.volumeMounts.some((m: Mount) => m.mountPath.startsWith('/src'))).toBe(false);
    // nor does either share the other's scratch space
    const scratch = (c: { volumeMounts: Mount[] }) => c.volumeMounts.filter((m) => !claimOf(m.name)).map((m) => m.name);
    expect(scratch(sandbox).filter((name) => scratch(history).includes(name))).toEqual([]);
  });

  it('run the runner in both, on its port, with its own token from the Secret and none in the Pod spec', () => {
    const spec = aSandbox();
    const { pod, secret } = onTheWire(spec, { ...OPTIONS, ports: { sandbox: 9070, history: 9071 } });
    const sandbox = container(pod, 'sandbox');
    const history = container(pod, 'history');
    expect(sandbox.image).toBe(OPTIONS.image);
    expect(history.image).toBe(OPTIONS.image);
    expect(sandbox.args).toEqual(['node', '/opt/aileron/runner.js', '--listen', '9070']);
    expect(history.args).toEqual(['node', '/opt/aileron/runner.js', '--role', 'history', '--listen', '9071']);
    // the image's entrypoint (tini) runs the args
    expect(sandbox.command).toBeUndefined();
    expect(sandbox.ports).toEqual([{ name: 'runner', containerPort: 9070, protocol: 'TCP' }]);
    expect(sandbox.readinessProbe.tcpSocket).toEqual({ port: 'runner' });
    expect(history.readinessProbe.tcpSocket).toEqual({ port: 'history' });
    const token = (c: { env: { name: string; valueFrom?: unknown }[] }) =>
      c.env.find((e) => e.name === 'AILERON_RUNNER_TOKEN')!.valueFrom;
    expect(token(sandbox)).toEqual({ secretKeyRef: { name: secret.metadata.name, key: 'sandbox-token' } });
    expect(token(history)).toEqual({ secretKeyRef: { name: secret.metadata.name, key: 'history-token' } });
    expect(secret).toMatchObject({
      type: 'Opaque',
      immutable: true,
      stringData: { 'sandbox-token': TOKENS.sandbox, 'history-token': TOKENS.history },
    });
    const podJson = JSON.stringify(pod);
    expect(podJson).not.toContain(TOKENS.sandbox);
    expect(podJson).not.toContain(TOKENS.history);
  });

  it('give the agent’s container the sandbox’s memory and the configured cpu (requests = limits), the history its own', () => {
    const limited = onTheWire(aSandbox()).pod;
    expect(container(limited, 'sandbox').resources).toEqual({
      requests: { cpu: '1', memory: '768Mi' },
      limits: { cpu: '1', memory: '768Mi' },
    });
    expect(container(limited, 'history').resources).toEqual({
      requests: { cpu: '250m', memory: '256Mi' },
      limits: { cpu: '250m', memory: '256Mi' },
    });
    // no memory in the sandbox's limits: the default; pids have no field in the Pod API (the runner's rlimits apply per command)
    const unlimited = onTheWire(aSandbox({ limits: {} })).pod;
    expect(container(unlimited, 'sandbox').resources.limits).toEqual({ cpu: '1', memory: '2Gi' });
    expect(JSON.stringify(limited)).not.toMatch(/pids/i);
  });

  it('admit only the control plane, to the two runners’ ports', () => {
    const { networkPolicy } = onTheWire(aSandbox());
    expect(networkPolicy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(networkPolicy.spec.ingress).toEqual([
      {
        from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'aileron-control-plane' } } }],
        ports: [
          { protocol: 'TCP', port: 7070 },
          { protocol: 'TCP', port: 7071 },
        ],
      },
    ]);
    const elsewhere = onTheWire(aSandbox(), { ...OPTIONS, controlPlaneNamespace: 'aileron' }).networkPolicy;
    expect(elsewhere.spec.ingress[0].from[0].namespaceSelector).toEqual({
      matchLabels: { 'kubernetes.io/metadata.name': 'aileron' },
    });
  });

  it('deny all egress with network none, not even DNS; allow the internet and cluster DNS, never the cluster, with egress', () => {
    const spec = aSandbox();
    const none = onTheWire(spec).networkPolicy;
    expect(none.spec.egress).toEqual([]);
    expect(none.spec.podSelector).toEqual({ matchLabels: { 'ai.aileron/sandbox': spec.id } });

    const egress = onTheWire(
      { ...spec, network: 'egress' },
      { ...OPTIONS, egressAllowCidrs: ['10.20.0.0/16'] },
    ).networkPolicy;
    const [dns, internet, allowed] = egress.spec.egress;
    expect(dns.ports).toEqual([
      { protocol: 'UDP', port: 53 },
      { protocol: 'TCP', port: 53 },
    ]);
    expect(dns.to).toEqual([
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
        podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
      },
    ]);
    const except = internet.to.flatMap((peer: { ipBlock: { except: string[] } }) => peer.ipBlock.except);
    for (const range of [
      '10.0.0.0/8',
      '172.16.0.0/12',
      '192.168.0.0/16',
      '169.254.0.0/16',
      '100.64.0.0/10',
      'fc00::/7',
    ])
      expect(except).toContain(range);
    expect(allowed).toEqual({ to: [{ ipBlock: { cidr: '10.20.0.0/16' } }] });
    // a cluster's global IPv6 pod range, named by the operator, is kept out as the private ranges are
    const excepted = onTheWire(
      { ...spec, network: 'egress' },
      { ...OPTIONS, egressExceptCidrs: ['2001:db8:42::/56'] },
    ).networkPolicy;
    const v6 = excepted.spec.egress[1].to.find((peer: { ipBlock: { cidr: string } }) => peer.ipBlock.cidr === '::/0');
    expect(v6.ipBlock.except).toContain('2001:db8:42::/56');
    expect(v6.ipBlock.except).toContain('fc00::/7');
  });

  it('name and label everything from the sandbox id, the name and id as annotations', () => {
    const spec = aSandbox();
    const wire = onTheWire(spec);
    expect(wire.pod.metadata.name).toBe(`sandbox-${spec.id}`);
    expect(wire.files.metadata.name).toBe(`sandbox-${spec.id}-files`);
    expect(wire.history.metadata.name).toBe(`sandbox-${spec.id}-history`);
    expect(wire.secret.metadata.name).toBe(`sandbox-${spec.id}-runner`);
    for (const obj of Object.values(wire)) {
      expect(obj.metadata.namespace).toBe('aileron-sandboxes');
      expect(obj.metadata.labels).toEqual({
        'app.kubernetes.io/part-of': 'aileron',
        'app.kubernetes.io/component': 'sandbox',
        'ai.aileron/organization': spec.organizationId,
        'ai.aileron/workspace': spec.workspaceId,
        'ai.aileron/sandbox': spec.id,
      });
      expect(obj.metadata.annotations).toEqual({
        'ai.aileron/sandbox-id': spec.id,
        'ai.aileron/sandbox-name': 'fix-login-bug',
      });
    }
  });

  it('make any id a DNS label, long or odd ones hashed so that two ids never share a name', () => {
    const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
    for (const id of ['Sandbox_One', 'sandbox.one', `${'a'.repeat(80)}`, '--', 'ÜBER']) {
      const names = sandboxNames(id);
      for (const name of [names.base, names.pod, names.files, names.history, names.secret]) {
        expect(name, id).toMatch(dnsLabel);
        expect(name.length, id).toBeLessThanOrEqual(63);
      }
      expect(() => new Pod(onTheWire(aSandbox({ id })).pod).validate()).not.toThrow();
    }
    expect(sandboxNames('Sandbox_One').base).not.toBe(sandboxNames('sandbox-one').base);
    expect(sandboxNames('a'.repeat(80)).base).not.toBe(sandboxNames(`${'a'.repeat(79)}b`).base);
    const uuid = randomUUID();
    expect(sandboxNames(uuid).base).toBe(uuid);
  });

  describe("a restricted runner's pod (a client's sandbox policy)", () => {
    const layout: RestrictedLayout = {
      src: 'ro',
      writable: ['app', 'lib/out'],
      readOnly: ['app/.git'],
      tmp: false,
      home: false,
      tmpdir: '/tmp/tmpdir',
      network: false,
    };
    const wire = (spec: SandboxSpec, l: RestrictedLayout) => ({
      pod: ObjectSerializer.serialize(restrictedPodManifest(spec, l, OPTIONS), 'V1Pod', ''),
      policy: ObjectSerializer.serialize(restrictedNetworkPolicyManifest(spec, l, OPTIONS), 'V1NetworkPolicy', ''),
    });

    it('passes the Kubernetes schemas, whatever the layout', () => {
      for (const l of [
        layout,
        { ...layout, src: 'rw' as const, writable: [], tmp: true, home: true, tmpdir: null, network: true },
      ]) {
        const { pod, policy } = wire(aSandbox({ network: 'egress' }), l);
        expect(() => new Pod(pod).validate()).not.toThrow();
        expect(() => new NetworkPolicy(policy).validate()).not.toThrow();
      }
    });

    it('mounts /src read-only, the writable roots again from the files claim, their .git read-only, and scratch only where allowed', () => {
      const spec = aSandbox();
      const { pod } = wire(spec, layout);
      const mounts = container(pod, 'sandbox').volumeMounts as (Mount & { subPath?: string })[];
      expect(mounts).toEqual([
        { name: 'files', mountPath: '/src', readOnly: true },
        { name: 'files', mountPath: '/src/app', subPath: 'app' },
        { name: 'files', mountPath: '/src/lib/out', subPath: 'lib/out' },
        { name: 'files', mountPath: '/src/app/.git', subPath: 'app/.git', readOnly: true },
        { name: 'tmpdir', mountPath: '/tmp/tmpdir' },
      ]);
      expect(pod.spec.containers).toHaveLength(1);
      expect(pod.spec.volumes.map((v: { name: string }) => v.name)).toEqual(['files', 'tmpdir']);
      // beside the sandbox's pod (the claim is ReadWriteOnce), and never selected by the sandbox's own NetworkPolicy
      expect(pod.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]).toEqual({
        labelSelector: { matchLabels: { 'ai.aileron/sandbox': sandboxNames(spec.id).base } },
        topologyKey: 'kubernetes.io/hostname',
      });
      expect(pod.metadata.labels['ai.aileron/sandbox']).not.toBe(sandboxNames(spec.id).base);
      expect(pod.metadata.labels['ai.aileron/restricted-of']).toBe(sandboxNames(spec.id).base);
    });

    it('has no egress unless the sandbox has it and the policy keeps it', () => {
      const egress = (network: SandboxSpec['network'], keep: boolean) =>
        wire(aSandbox({ network }), { ...layout, network: keep }).policy.spec.egress;
      expect(egress('egress', false)).toEqual([]);
      expect(egress('none', true)).toEqual([]);
      expect(JSON.stringify(egress('egress', true))).toContain('0.0.0.0/0');
      const { pod, policy } = wire(aSandbox(), layout);
      expect(policy.spec.podSelector).toEqual({
        matchLabels: { 'ai.aileron/sandbox': pod.metadata.labels['ai.aileron/sandbox'] },
      });
      expect(policy.spec.ingress[0].ports).toEqual([{ protocol: 'TCP', port: 7070 }]);
    });
  });
});
