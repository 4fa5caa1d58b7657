// The client's own serializer: what it writes on the wire is what the API server validates.
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { Pod } from 'kubernetes-models/v1';
import { describe, expect, it } from 'vitest';
import { EGRESS_EXCEPT_V4, EGRESS_EXCEPT_V6 } from '@aileron/net';
import { controlPlanePeer, egressRules } from './network-policy';
import { POD_UID, restrictedContainerSecurityContext, restrictedPodSecurityContext } from './pod-security';

/** A NetworkPolicy of these rules as the client writes it (`_from` as `from`, for one). */
function aPolicy(egress: ReturnType<typeof egressRules>, namespace = 'aileron-pool', controlPlaneNamespace?: string) {
  return ObjectSerializer.serialize(
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'p', namespace },
      spec: {
        podSelector: {},
        policyTypes: ['Ingress', 'Egress'],
        egress,
        ingress: [
          { _from: [controlPlanePeer(namespace, controlPlaneNamespace)], ports: [{ protocol: 'TCP', port: 8080 }] },
        ],
      },
    },
    'V1NetworkPolicy',
    '',
  );
}

describe('what every driver of ours asks of Kubernetes', () => {
  it('egress: cluster DNS and the public internet only, never a private, link-local or metadata address; the operator’s ranges in their own family', () => {
    const [dns, internet, ...rest] = egressRules();
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
    expect(internet!.to).toEqual([
      { ipBlock: { cidr: '0.0.0.0/0', except: EGRESS_EXCEPT_V4 } },
      { ipBlock: { cidr: '::/0', except: EGRESS_EXCEPT_V6 } },
    ]);
    for (const range of [
      '10.0.0.0/8',
      '172.16.0.0/12',
      '192.168.0.0/16',
      '169.254.0.0/16',
      '100.64.0.0/10',
      '127.0.0.0/8',
    ])
      expect(EGRESS_EXCEPT_V4).toContain(range);
    for (const range of ['fc00::/7', 'fe80::/10', '::1/128']) expect(EGRESS_EXCEPT_V6).toContain(range);
    expect(rest).toEqual([]);

    const opened = egressRules(['10.20.0.0/16', 'fd00:1::/64'], ['2001:db8:42::/56', '203.0.113.0/24']);
    expect(opened[1]!.to).toEqual([
      { ipBlock: { cidr: '0.0.0.0/0', except: [...EGRESS_EXCEPT_V4, '203.0.113.0/24'] } },
      { ipBlock: { cidr: '::/0', except: [...EGRESS_EXCEPT_V6, '2001:db8:42::/56'] } },
    ]);
    expect(opened[2]).toEqual({ to: [{ ipBlock: { cidr: '10.20.0.0/16' } }, { ipBlock: { cidr: 'fd00:1::/64' } }] });
    for (const egress of [egressRules(), opened])
      expect(() => new NetworkPolicy(aPolicy(egress)).validate()).not.toThrow();
  });

  it('ingress: from control-plane pods only, in their own namespace when it is another', () => {
    const same = aPolicy([]);
    expect(same.spec.ingress[0].from).toEqual([
      { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'aileron-control-plane' } } },
    ]);
    expect(aPolicy([], 'aileron-pool', 'aileron-pool').spec.ingress[0].from[0].namespaceSelector).toBeUndefined();
    const elsewhere = aPolicy([], 'aileron-pool', 'aileron');
    expect(elsewhere.spec.ingress[0].from[0].namespaceSelector).toEqual({
      matchLabels: { 'kubernetes.io/metadata.name': 'aileron' },
    });
    expect(() => new NetworkPolicy(elsewhere).validate()).not.toThrow();
  });

  it('pods as the restricted Pod Security Standard wants them: not root, seccomp, no escalation, no capabilities, read-only root', () => {
    const pod = ObjectSerializer.serialize(
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'p' },
        spec: {
          securityContext: restrictedPodSecurityContext(),
          containers: [{ name: 'c', image: 'i', securityContext: restrictedContainerSecurityContext() }],
        },
      },
      'V1Pod',
      '',
    );
    expect(() => new Pod(pod).validate()).not.toThrow();
    expect(POD_UID).not.toBe(0);
    expect(pod.spec.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: POD_UID,
      runAsGroup: POD_UID,
      fsGroup: POD_UID,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(pod.spec.containers[0].securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
    });
  });
});
