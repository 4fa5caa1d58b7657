import { randomBytes, randomUUID } from 'node:crypto';
// The client's own serializer: what it writes on the wire is what the API server validates.
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { Pod, Secret } from 'kubernetes-models/v1';
import { describe, expect, it } from 'vitest';
import type { InstanceSpec } from '../driver';
import { EGRESS_EXCEPT_V4, EGRESS_EXCEPT_V6 } from '@aileron/net';
import { instanceManifests, type ManifestOptions } from './manifests';

const CANARY = `canary-${randomBytes(12).toString('hex')}`;
const TOKEN = randomBytes(32).toString('base64url');
const OPTIONS: ManifestOptions = {
  namespace: 'aileron-pool',
  runnerImage: 'ghcr.io/aileron/mcp-runner:1.4.0',
  port: 8080,
};

function aSpec(overrides: Partial<InstanceSpec> = {}): InstanceSpec {
  return {
    id: `memory-${randomBytes(6).toString('hex')}`,
    organizationId: randomUUID(),
    organizationSlug: 'acme',
    workspaceId: randomUUID(),
    workspaceSlug: 'platform-team',
    server: 'memory',
    version: '2.1.0-rc.1',
    run: { kind: 'command', command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'] },
    env: { GITHUB_TOKEN: CANARY, LOG_LEVEL: 'debug' },
    secrets: [CANARY],
    limits: { memoryMb: 384, cpuMillis: 250 },
    ...overrides,
  };
}

/** The manifests as JSON on the wire, after the client's serializer (which writes `_from` as `from`, for one). */
function onTheWire(spec: InstanceSpec, options: ManifestOptions = OPTIONS) {
  const manifests = instanceManifests(spec, TOKEN, options);
  return {
    secret: ObjectSerializer.serialize(manifests.secret, 'V1Secret', ''),
    pod: ObjectSerializer.serialize(manifests.pod, 'V1Pod', ''),
    networkPolicy: ObjectSerializer.serialize(manifests.networkPolicy, 'V1NetworkPolicy', ''),
  };
}

describe('Kubernetes manifests of a pool instance', () => {
  it('pass the Kubernetes schemas, for a stdio command and for an image', () => {
    for (const spec of [
      aSpec(),
      aSpec({ run: { kind: 'image', image: 'registry.example.com/mcp/github:2.0.1', args: ['--read-only'] } }),
    ]) {
      const wire = onTheWire(spec);
      expect(() => new Pod(wire.pod).validate()).not.toThrow();
      expect(() => new Secret(wire.secret).validate()).not.toThrow();
      expect(() => new NetworkPolicy(wire.networkPolicy).validate()).not.toThrow();
    }
  });

  it('run a stdio command behind the bridge of the runner image, on the configured port', () => {
    const { pod } = onTheWire(aSpec(), { ...OPTIONS, port: 9090 });
    const [container] = pod.spec.containers;
    expect(container.image).toBe(OPTIONS.runnerImage);
    expect(container.command).toBeUndefined();
    expect(container.args).toEqual([
      '--host',
      '0.0.0.0',
      '--port',
      '9090',
      '--',
      'npx',
      '-y',
      '@modelcontextprotocol/server-memory',
    ]);
    expect(container.ports).toEqual([{ name: 'mcp', containerPort: 9090, protocol: 'TCP' }]);
    expect(container.readinessProbe.tcpSocket).toEqual({ port: 'mcp' });
  });

  it("run an image with its own entrypoint and the catalog's args", () => {
    const { pod } = onTheWire(
      aSpec({ run: { kind: 'image', image: 'registry.example.com/mcp/github:2.0.1', args: ['--read-only'] } }),
    );
    expect(pod.spec.containers[0].image).toBe('registry.example.com/mcp/github:2.0.1');
    expect(pod.spec.containers[0].args).toEqual(['--read-only']);
    const bare = onTheWire(aSpec({ run: { kind: 'image', image: 'registry.example.com/mcp/github:2.0.1', args: [] } }));
    // no args at all, so the image's own CMD applies
    expect(bare.pod.spec.containers[0].args).toBeUndefined();
  });

  it('label every object with the tenant, the server and the instance', () => {
    const spec = aSpec();
    const wire = onTheWire(spec);
    const labels = {
      'app.kubernetes.io/managed-by': 'aileron',
      'aileron.dev/organization': spec.organizationId,
      'aileron.dev/workspace': spec.workspaceId,
      'aileron.dev/server': 'memory',
      'aileron.dev/instance': spec.id,
    };
    for (const obj of Object.values(wire)) expect(obj.metadata.labels).toEqual(labels);
    expect(wire.pod.metadata.name).toBe(`mcp-${spec.id}`);
    expect(wire.pod.metadata.annotations['aileron.dev/version']).toBe('2.1.0-rc.1');
  });

  it('lock the pod down: non-root, no privilege escalation, read-only root, no capabilities, limits, no API token', () => {
    const { pod } = onTheWire(aSpec());
    expect(pod.spec).toMatchObject({
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 10001,
        runAsGroup: 10001,
        fsGroup: 10001,
        seccompProfile: { type: 'RuntimeDefault' },
      },
    });
    const [container] = pod.spec.containers;
    expect(container.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(container.resources).toEqual({
      requests: { memory: '384Mi', cpu: '250m' },
      limits: { memory: '384Mi', cpu: '250m' },
    });
    expect(container.volumeMounts.map((m: { mountPath: string }) => m.mountPath).sort()).toEqual(['/home/mcp', '/tmp']);
    expect(pod.spec.volumes.every((v: { emptyDir?: unknown }) => v.emptyDir)).toBe(true);
  });

  it('keep the environment in the Secret only: the Pod names the Secret and holds no value', () => {
    const spec = aSpec();
    const { pod, secret } = onTheWire(spec);
    expect(pod.spec.containers[0].env).toBeUndefined();
    expect(pod.spec.containers[0].envFrom).toEqual([{ secretRef: { name: secret.metadata.name } }]);
    const podJson = JSON.stringify(pod);
    expect(podJson).not.toContain(CANARY);
    expect(podJson).not.toContain(TOKEN);
    expect(secret.type).toBe('Opaque');
    expect(secret.stringData).toEqual({
      GITHUB_TOKEN: CANARY,
      LOG_LEVEL: 'debug',
      HOME: '/home/mcp',
      AILERON_BRIDGE_TOKEN: TOKEN,
    });
  });

  it("never let the catalog's env replace the bridge token", () => {
    const { secret } = onTheWire(aSpec({ env: { AILERON_BRIDGE_TOKEN: 'chosen-by-the-entry' } }));
    expect(secret.stringData.AILERON_BRIDGE_TOKEN).toBe(TOKEN);
  });

  it("name the replica that made them and, given its UID, have the control plane's Pod own them without blocking its deletion", () => {
    const replica = { name: 'aileron-control-plane-7d9f8c6b5-x2x4q', uid: randomUUID() };
    const wire = onTheWire(aSpec(), { ...OPTIONS, replica });
    expect(() => new Pod(wire.pod).validate()).not.toThrow();
    expect(() => new Secret(wire.secret).validate()).not.toThrow();
    expect(() => new NetworkPolicy(wire.networkPolicy).validate()).not.toThrow();
    for (const obj of Object.values(wire)) {
      expect(obj.metadata.labels['aileron.dev/replica']).toBe(replica.name);
      expect(obj.metadata.ownerReferences).toEqual([
        { apiVersion: 'v1', kind: 'Pod', ...replica, controller: false, blockOwnerDeletion: false },
      ]);
    }

    // a name alone labels but owns nothing; no name, neither
    const named = onTheWire(aSpec(), { ...OPTIONS, replica: { name: replica.name } });
    expect(named.pod.metadata.labels['aileron.dev/replica']).toBe(replica.name);
    expect(named.pod.metadata.ownerReferences).toBeUndefined();
    expect(onTheWire(aSpec()).pod.metadata.labels['aileron.dev/replica']).toBeUndefined();
  });

  it('hash a Pod name too long for a label value, so the label stays valid and tells long names apart', () => {
    const long = `${'a'.repeat(70)}.example`;
    const replicaLabel = (name: string) =>
      onTheWire(aSpec(), { ...OPTIONS, replica: { name } }).pod.metadata.labels['aileron.dev/replica'];
    expect(replicaLabel(long)).toMatch(/^[0-9a-f]{63}$/);
    expect(replicaLabel(`${long}-2`)).not.toBe(replicaLabel(long));
    expect(() => new Pod(onTheWire(aSpec(), { ...OPTIONS, replica: { name: long } }).pod).validate()).not.toThrow();
  });

  it('admit ingress to the instance from control-plane pods only, on the MCP port', () => {
    const spec = aSpec();
    const { networkPolicy } = onTheWire(spec);
    expect(networkPolicy.spec).toMatchObject({
      podSelector: { matchLabels: { 'aileron.dev/instance': spec.id } },
      ingress: [
        {
          from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'aileron-control-plane' } } }],
          ports: [{ protocol: 'TCP', port: 8080 }],
        },
      ],
    });
    const elsewhere = onTheWire(spec, { ...OPTIONS, controlPlaneNamespace: 'aileron' });
    expect(elsewhere.networkPolicy.spec.ingress[0].from[0].namespaceSelector).toEqual({
      matchLabels: { 'kubernetes.io/metadata.name': 'aileron' },
    });
  });

  it('let an instance reach cluster DNS and the public internet only: no private, link-local or metadata address, nothing of the cluster', () => {
    const { networkPolicy } = onTheWire(aSpec());
    expect(networkPolicy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    const [dns, internet, ...rest] = networkPolicy.spec.egress;
    expect(dns).toEqual({
      to: [
        {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
          podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
        },
      ],
      ports: [
        { protocol: 'UDP', port: 53 },
        { protocol: 'TCP', port: 53 },
      ],
    });
    expect(internet.to.map((peer: { ipBlock: { cidr: string } }) => peer.ipBlock.cidr)).toEqual(['0.0.0.0/0', '::/0']);
    const except = internet.to.flatMap((peer: { ipBlock: { except: string[] } }) => peer.ipBlock.except);
    for (const range of [
      '10.0.0.0/8',
      '172.16.0.0/12',
      '192.168.0.0/16',
      '169.254.0.0/16',
      '100.64.0.0/10',
      '127.0.0.0/8',
      'fc00::/7',
      'fe80::/10',
    ])
      expect(except).toContain(range);
    // no selector peer but DNS: other pods of the cluster are never a destination
    expect(
      internet.to.every(
        (peer: Record<string, unknown>) =>
          Object.keys(peer)
            .filter((key) => peer[key] !== undefined)
            .join() === 'ipBlock',
      ),
    ).toBe(true);
    expect(rest).toEqual([]);
    expect(() => new NetworkPolicy(onTheWire(aSpec()).networkPolicy).validate()).not.toThrow();

    // the operator's allow-list opens exactly those ranges, and still validates
    const allowed = onTheWire(aSpec(), { ...OPTIONS, egressAllowCidrs: ['10.20.0.0/16', 'fd00:1::/64'] }).networkPolicy;
    expect(allowed.spec.egress[2]).toEqual({
      to: [{ ipBlock: { cidr: '10.20.0.0/16' } }, { ipBlock: { cidr: 'fd00:1::/64' } }],
    });
    expect(() => new NetworkPolicy(allowed).validate()).not.toThrow();
    // the operator's except-list keeps public ranges out too (a cluster's global IPv6 pods), each in its own family's block
    const excepted = onTheWire(aSpec(), {
      ...OPTIONS,
      egressExceptCidrs: ['2001:db8:42::/56', '203.0.113.0/24'],
    }).networkPolicy;
    const [v4, v6] = excepted.spec.egress[1].to.map(
      (peer: { ipBlock: { cidr: string; except: string[] } }) => peer.ipBlock,
    );
    expect(v6).toEqual({ cidr: '::/0', except: [...EGRESS_EXCEPT_V6, '2001:db8:42::/56'] });
    expect(v4).toEqual({ cidr: '0.0.0.0/0', except: [...EGRESS_EXCEPT_V4, '203.0.113.0/24'] });
    expect(() => new NetworkPolicy(excepted).validate()).not.toThrow();
  });
});
