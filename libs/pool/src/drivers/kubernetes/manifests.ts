import type { V1NetworkPolicy, V1OwnerReference, V1Pod, V1Secret } from '@kubernetes/client-node';
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
 * entrypoint is the bridge, `bridge/main.ts`); an image given in the catalog
 * (`run.kind === 'image'`) must do it itself, started with its own entrypoint
 * and `run.args`.
 */

export const RUN_AS = 10001;
export const HOME = '/home/mcp';
export const TOKEN_ENV = 'AILERON_BRIDGE_TOKEN';
export const CONTAINER = 'mcp';
/** Control-plane pods carry this label; they alone may open connections to an instance. */
export const CONTROL_PLANE_SELECTOR = { 'app.kubernetes.io/name': 'aileron-control-plane' } as const;
export const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'aileron' } as const;
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
}

export interface InstanceManifests {
  secret: V1Secret;
  pod: V1Pod;
  networkPolicy: V1NetworkPolicy;
}

export const podName = (instanceId: string): string => `mcp-${instanceId}`;
export const secretName = (instanceId: string): string => `mcp-${instanceId}-env`;
export const networkPolicyName = (instanceId: string): string => `mcp-${instanceId}`;

export function instanceLabels(spec: InstanceSpec): Record<string, string> {
  return {
    ...MANAGED_BY,
    'aileron.dev/organization': spec.organizationId,
    'aileron.dev/workspace': spec.workspaceId,
    'aileron.dev/server': spec.server,
    'aileron.dev/instance': spec.id,
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
    metadata: { name: secretName(spec.id), namespace: options.namespace, labels: instanceLabels(spec), annotations: instanceAnnotations(spec) },
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
    run.kind === 'command' ? ['--host', '0.0.0.0', '--port', String(options.port), '--', run.command, ...run.args] : run.args;
  const resources = { memory: `${spec.limits.memoryMb}Mi`, cpu: `${spec.limits.cpuMillis}m` };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: podName(spec.id), namespace: options.namespace, labels: instanceLabels(spec), annotations: instanceAnnotations(spec) },
    spec: {
      // the pool supervises restarts (with backoff and a fresh token); a kubelet restart would hide the crash from it
      restartPolicy: 'Never',
      // a tenant's server has no business with the cluster's API or other services' addresses
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 5,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: RUN_AS,
        runAsGroup: RUN_AS,
        fsGroup: RUN_AS,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: CONTAINER,
          image,
          ...(args.length > 0 ? { args } : {}),
          ports: [{ name: 'mcp', containerPort: options.port, protocol: 'TCP' }],
          // values only through the Secret: a Pod spec is readable by anyone who may list pods
          envFrom: [{ secretRef: { name: secretName(spec.id) } }],
          resources: { requests: resources, limits: resources },
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            runAsNonRoot: true,
            capabilities: { drop: ['ALL'] },
          },
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

/** Only the control plane may connect, and only to the MCP port: not other tenants' instances, not anything else in the cluster. */
export function networkPolicyManifest(spec: InstanceSpec, options: ManifestOptions): V1NetworkPolicy {
  const controlPlaneNamespace = options.controlPlaneNamespace;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: networkPolicyName(spec.id), namespace: options.namespace, labels: instanceLabels(spec) },
    spec: {
      podSelector: { matchLabels: { 'aileron.dev/instance': spec.id } },
      policyTypes: ['Ingress'],
      ingress: [
        {
          // the client's model name for `from` (a reserved word); its serializer writes `from`
          _from: [
            {
              podSelector: { matchLabels: { ...CONTROL_PLANE_SELECTOR } },
              ...(controlPlaneNamespace && controlPlaneNamespace !== options.namespace
                ? { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': controlPlaneNamespace } } }
                : {}),
            },
          ],
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

/** Makes the Pod the owner, so the garbage collector removes the object with it even if the control plane never does. */
export function ownedByPod(pod: { name: string; uid: string }): { metadata: { ownerReferences: V1OwnerReference[] } } {
  return { metadata: { ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: pod.name, uid: pod.uid }] } };
}
