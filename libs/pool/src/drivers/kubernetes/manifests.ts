import { createHash } from 'node:crypto';
import type { V1NetworkPolicy, V1OwnerReference, V1Pod, V1Secret } from '@kubernetes/client-node';
import {
  controlPlanePeer,
  egressRules,
  POD_UID,
  restrictedContainerSecurityContext,
  restrictedPodSecurityContext,
} from '@aileron/kubernetes';
import type { InstanceSpec } from '../driver';

/**
 * The Kubernetes objects of one pool instance, as plain data. Typed with the
 * client's own models because its serializer sends only the fields those
 * models know: a misspelt field would be dropped silently, so it must not
 * compile.
 *
 * Contract with what runs in the pod: the container serves MCP Streamable
 * HTTP on `port` at `/mcp` and accepts only `Authorization: Bearer
 * $AILERON_BRIDGE_TOKEN`. For a stdio command the runner image does this (its
 * entrypoint is the bridge program, `apps/mcp-bridge`); an image given in the catalog
 * (`run.kind === 'image'`) must do it itself, started with its own entrypoint
 * and `run.args`.
 */

export const RUN_AS = POD_UID;
export const HOME = '/home/mcp';
export const TOKEN_ENV = 'AILERON_BRIDGE_TOKEN';
export const CONTAINER = 'mcp';
export const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'aileron' } as const;
/** `MANAGED_BY` as a list call's label selector. */
export const MANAGED_BY_SELECTOR = Object.entries(MANAGED_BY)
  .map(([key, value]) => `${key}=${value}`)
  .join(',');
/** Which control-plane replica made an object: the one replica that may reap it when no ownerReference says so. */
export const REPLICA_LABEL = 'aileron.dev/replica';
/** on every object of an instance; its value names the Pod, Secret and NetworkPolicy (podName…) */
export const INSTANCE_LABEL = 'aileron.dev/instance';
/** Per emptyDir: scratch space counts against the node's disk, so a tenant cannot fill it. */
const SCRATCH_LIMIT = '256Mi';

export interface ManifestOptions {
  namespace: string;
  /** image whose entrypoint is the bridge, for `run.kind === 'command'` */
  runnerImage: string;
  /** where the container serves Streamable HTTP */
  port: number;
  /** namespace of the control plane's pods when it is not `namespace` */
  controlPlaneNamespace?: string;
  /** private ranges the instances may reach besides the public internet (AILERON_POOL_EGRESS_ALLOW_CIDRS) */
  egressAllowCidrs?: string[];
  /** public ranges they must not reach besides EGRESS_EXCEPT_V4/V6, e.g. the cluster's global IPv6 ranges (AILERON_POOL_EGRESS_EXCEPT_CIDRS) */
  egressExceptCidrs?: string[];
  /**
   * This control plane's own Pod: its name labels every object (REPLICA_LABEL);
   * its UID, when given, owns the Pod (and, until the Pod owns them, the
   * Secret and NetworkPolicy). Give the UID only when that Pod lives in
   * `namespace`: the garbage collector treats an owner in another namespace
   * as absent and would delete the instance at once.
   */
  replica?: { name: string; uid?: string };
}

export interface InstanceManifests {
  secret: V1Secret;
  pod: V1Pod;
  networkPolicy: V1NetworkPolicy;
}

export const podName = (instanceId: string): string => `mcp-${instanceId}`;
export const secretName = (instanceId: string): string => `mcp-${instanceId}-env`;
export const networkPolicyName = (instanceId: string): string => `mcp-${instanceId}`;

export function instanceLabels(spec: InstanceSpec, replica?: { name: string }): Record<string, string> {
  return {
    ...MANAGED_BY,
    'aileron.dev/organization': spec.organizationId,
    'aileron.dev/workspace': spec.workspaceId,
    'aileron.dev/server': spec.server,
    [INSTANCE_LABEL]: spec.id,
    ...(replica ? { [REPLICA_LABEL]: replicaLabelValue(replica.name) } : {}),
  };
}

/**
 * A Pod name as a label value. Names are DNS subdomains, which fit a label
 * value's grammar up to its 63 characters; a longer one is hashed rather
 * than cut, so two long names sharing a prefix stay apart.
 */
export function replicaLabelValue(podName: string): string {
  return podName.length <= 63 ? podName : createHash('sha256').update(podName).digest('hex').slice(0, 63);
}

/**
 * The control plane's own Pod as owner, so the garbage collector deletes what
 * a crashed replica left once its Pod is gone. Neither controller (nothing
 * reconciles instances) nor blocking: deleting the control plane must never
 * wait on its instances.
 */
export function controlPlaneOwner(pod: { name: string; uid: string }): V1OwnerReference {
  return { apiVersion: 'v1', kind: 'Pod', name: pod.name, uid: pod.uid, controller: false, blockOwnerDeletion: false };
}

/** Labels, and the control plane as owner when its UID is known, of every object an instance has. */
function instanceMetadata(spec: InstanceSpec, name: string, options: ManifestOptions) {
  const replica = options.replica;
  return {
    name,
    namespace: options.namespace,
    labels: instanceLabels(spec, replica),
    ...(replica?.uid ? { ownerReferences: [controlPlaneOwner({ name: replica.name, uid: replica.uid })] } : {}),
  };
}

/** Slugs and versions may not fit a label value's grammar; annotations take any string. */
function instanceAnnotations(spec: InstanceSpec): Record<string, string> {
  return {
    'aileron.dev/organization-slug': spec.organizationSlug,
    'aileron.dev/workspace-slug': spec.workspaceSlug,
    'aileron.dev/version': spec.version,
  };
}

/**
 * The instance's whole environment. The driver's own entries come last so a
 * catalog entry cannot replace the bearer token the bridge checks.
 */
export function secretManifest(spec: InstanceSpec, token: string, options: ManifestOptions): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    // owned by the control plane until the Pod exists and takes it over (ownedByPod), so a crash in between leaves no credentials behind for good
    metadata: { ...instanceMetadata(spec, secretName(spec.id), options), annotations: instanceAnnotations(spec) },
    type: 'Opaque',
    // nothing should change an instance's credentials under it; a new start gets a new Secret
    immutable: true,
    stringData: { ...spec.env, HOME, [TOKEN_ENV]: token },
  };
}

export function podManifest(spec: InstanceSpec, options: ManifestOptions): V1Pod {
  const run = spec.run;
  const image = run.kind === 'command' ? options.runnerImage : run.image;
  const args =
    run.kind === 'command'
      ? ['--host', '0.0.0.0', '--port', String(options.port), '--', run.command, ...run.args]
      : run.args;
  const resources = { memory: `${spec.limits.memoryMb}Mi`, cpu: `${spec.limits.cpuMillis}m` };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { ...instanceMetadata(spec, podName(spec.id), options), annotations: instanceAnnotations(spec) },
    spec: {
      // the pool supervises restarts (with backoff and a fresh token); a kubelet restart would hide the crash from it
      restartPolicy: 'Never',
      // a tenant's server has no business with the cluster's API or other services' addresses
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 5,
      securityContext: restrictedPodSecurityContext(),
      containers: [
        {
          name: CONTAINER,
          image,
          ...(args.length > 0 ? { args } : {}),
          ports: [{ name: 'mcp', containerPort: options.port, protocol: 'TCP' }],
          // values only through the Secret: a Pod spec is readable by anyone who may list pods
          envFrom: [{ secretRef: { name: secretName(spec.id) } }],
          resources: { requests: resources, limits: resources },
          securityContext: restrictedContainerSecurityContext(),
          // the bridge's /healthz wants the bearer token, which a probe cannot carry without putting it in the Pod spec
          readinessProbe: { tcpSocket: { port: 'mcp' }, periodSeconds: 2, failureThreshold: 3 },
          volumeMounts: [
            { name: 'tmp', mountPath: '/tmp' },
            { name: 'home', mountPath: HOME },
          ],
          workingDir: HOME,
        },
      ],
      volumes: [
        { name: 'tmp', emptyDir: { sizeLimit: SCRATCH_LIMIT } },
        { name: 'home', emptyDir: { sizeLimit: SCRATCH_LIMIT } },
      ],
    },
  };
}

/**
 * Only the control plane may connect, and only to the MCP port: not other
 * tenants' instances, not anything else in the cluster. An instance may reach
 * the public internet and the cluster's DNS, never the cluster itself (other
 * tenants, the API server, the control plane's database), the node,
 * link-local or the cloud metadata service: a server is tenant code, and
 * without an egress policy it could reach everything the pod's network does.
 */
export function networkPolicyManifest(spec: InstanceSpec, options: ManifestOptions): V1NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: instanceMetadata(spec, networkPolicyName(spec.id), options),
    spec: {
      podSelector: { matchLabels: { [INSTANCE_LABEL]: spec.id } },
      policyTypes: ['Ingress', 'Egress'],
      egress: egressRules(options.egressAllowCidrs, options.egressExceptCidrs),
      ingress: [
        {
          // the client's model name for `from` (a reserved word); its serializer writes `from`
          _from: [controlPlanePeer(options.namespace, options.controlPlaneNamespace)],
          ports: [{ protocol: 'TCP', port: options.port }],
        },
      ],
    },
  };
}

export function instanceManifests(spec: InstanceSpec, token: string, options: ManifestOptions): InstanceManifests {
  return {
    secret: secretManifest(spec, token, options),
    pod: podManifest(spec, options),
    networkPolicy: networkPolicyManifest(spec, options),
  };
}

/**
 * Makes the Pod the owner, so the garbage collector removes the object with it
 * even if the control plane never does. As a merge patch it replaces the list,
 * dropping the control plane as owner: an object goes only when all its
 * owners are gone, and the Secret must go with its Pod.
 */
export function ownedByPod(pod: { name: string; uid: string }): { metadata: { ownerReferences: V1OwnerReference[] } } {
  return { metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: pod.name, uid: pod.uid }] } };
}
