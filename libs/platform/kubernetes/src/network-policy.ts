import type { V1NetworkPolicyEgressRule, V1NetworkPolicyPeer } from '@kubernetes/client-node';
import { EGRESS_EXCEPT_V4, EGRESS_EXCEPT_V6 } from '@aileron/net';

/** Control-plane pods carry this label; they alone may open connections to a pool instance or a sandbox. */
export const CONTROL_PLANE_SELECTOR = { 'app.kubernetes.io/name': 'aileron-control-plane' } as const;

/**
 * The egress rules of a pod that may reach the internet (EGRESS_EXCEPT_V4/V6 and
 * `exceptCidrs` say what not), the cluster's DNS and the ranges allowed besides.
 * A cluster whose pods or services have global IPv6 addresses must name those
 * ranges in `exceptCidrs`: to the rules above they are the public internet.
 */
export function egressRules(
  allowCidrs: readonly string[] = [],
  exceptCidrs: readonly string[] = [],
): V1NetworkPolicyEgressRule[] {
  // an ipBlock's except must lie inside its cidr: each extra range goes to its own family's block
  const v6 = (cidr: string): boolean => cidr.includes(':');
  return [
    {
      // DNS, to the cluster's resolver only
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
    },
    {
      to: [
        { ipBlock: { cidr: '0.0.0.0/0', except: [...EGRESS_EXCEPT_V4, ...exceptCidrs.filter((cidr) => !v6(cidr))] } },
        { ipBlock: { cidr: '::/0', except: [...EGRESS_EXCEPT_V6, ...exceptCidrs.filter(v6)] } },
      ],
    },
    ...(allowCidrs.length > 0 ? [{ to: allowCidrs.map((cidr) => ({ ipBlock: { cidr } })) }] : []),
  ];
}

/** The control plane's pods, as an ingress rule's peer: in `namespace`, or in `controlPlaneNamespace` when that is another. */
export function controlPlanePeer(namespace: string, controlPlaneNamespace?: string): V1NetworkPolicyPeer {
  return {
    podSelector: { matchLabels: { ...CONTROL_PLANE_SELECTOR } },
    ...(controlPlaneNamespace && controlPlaneNamespace !== namespace
      ? { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': controlPlaneNamespace } } }
      : {}),
  };
}
