import { createHash } from 'node:crypto';
import type {
  V1Container,
  V1EnvVar,
  V1NetworkPolicy,
  V1ObjectMeta,
  V1PersistentVolumeClaim,
  V1Pod,
  V1ResourceRequirements,
  V1Secret,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import {
  controlPlanePeer,
  egressRules,
  restrictedContainerSecurityContext,
  restrictedPodSecurityContext,
} from '@aileron/kubernetes';
import { HISTORY_DIR, RUNNER_TOKEN_ENV, SANDBOX_WORKDIR } from '../../runner-protocol';
import type { SandboxSpec } from '../driver';

/**
 * The Kubernetes objects of one sandbox, as plain data typed with the
 * client's models (its serializer drops fields they do not know, so a
 * misspelt one must not compile):
 *
 * - two PersistentVolumeClaims, the sandbox's files (/src) and its git
 *   history (/history), which outlive the Pod: a stopped sandbox keeps both;
 * - a Secret with the two runners' bearer tokens, one per container;
 * - a NetworkPolicy: only the control plane may connect, to the runners'
 *   ports; egress as the sandbox's `network` says;
 * - the Pod, two containers of the same image: `sandbox`, the agent's,
 *   with /src read-write and never the history; and `history`, with the
 *   history and never /src, whose runner answers only `git` (snapshots are
 *   built there from what the agent's runner sends). The agent cannot reach
 *   the history: not its volume, not the history runner's token (another
 *   container, another process namespace).
 *
 * Contract with the image (images/sandbox-base): the compiled runner at
 * RUNNER_PATH, `node` on the PATH, /usr/bin/git, and an entrypoint that runs
 * its arguments (tini there, which also reaps what the agent's commands
 * leave behind); AILERON_MCP_VERSION in its environment, which the runner's
 * ping reports.
 */

export const SANDBOX_CONTAINER = 'sandbox';
export const HISTORY_CONTAINER = 'history';
export const RUNNER_PATH = '/opt/aileron/runner.js';
/** the home of the image's user (POD_UID, as every pod of ours runs) */
export const SANDBOX_HOME = '/home/agent';
export const SANDBOX_LABEL = 'ai.aileron/sandbox';
export const WORKSPACE_LABEL = 'ai.aileron/workspace';
export const ORGANIZATION_LABEL = 'ai.aileron/organization';
/** Every sandbox pod has the sandbox label: the driver's watch selects on it. */
export const SANDBOX_SELECTOR = SANDBOX_LABEL;
/** The Secret's keys, one token per container. */
export const TOKEN_KEYS = { sandbox: 'sandbox-token', history: 'history-token' } as const;
export const DEFAULT_PORTS = { sandbox: 7070, history: 7071 } as const;

export interface RunnerTokens {
  sandbox: string;
  history: string;
}

export interface SandboxManifestOptions {
  namespace: string;
  image: string;
  ports: { sandbox: number; history: number };
  /** sizes of the two claims, and their storage class (else the cluster's default) */
  storage: { files: string; history: string; storageClassName?: string };
  /** the agent's container: cpu always, memory unless the sandbox's limits name it */
  sandboxResources: { cpu: string; memory: string };
  historyResources: { cpu: string; memory: string };
  /** each scratch directory's (/tmp, home) size limit: it counts against the node's disk */
  scratchSize: string;
  /** namespace of the control plane's pods when it is not `namespace` */
  controlPlaneNamespace?: string;
  /** private ranges an `egress` sandbox may reach besides the public internet */
  egressAllowCidrs?: string[];
  /** public ranges it must not reach besides the private ones (egressRules, as for the pool's pods) */
  egressExceptCidrs?: string[];
}

export interface SandboxNames {
  /** a DNS label derived from the sandbox id: the label value, and the stem of every name */
  base: string;
  pod: string;
  files: string;
  history: string;
  secret: string;
  networkPolicy: string;
}

export interface SandboxManifests {
  files: V1PersistentVolumeClaim;
  history: V1PersistentVolumeClaim;
  secret: V1Secret;
  networkPolicy: V1NetworkPolicy;
  pod: V1Pod;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
/** so that `sandbox-<base>-history` stays a DNS label (63) too */
const MAX_BASE = 46;

/**
 * Names from the sandbox id (a UUID, used as it is). Anything else is made a
 * DNS label, and given a hash of the id when that changed or shortened it, so
 * two ids never share a name.
 */
export function sandboxNames(id: string): SandboxNames {
  const lower = id.toLowerCase();
  const base =
    lower === id && DNS_LABEL.test(id) && id.length <= MAX_BASE
      ? id
      : `${
          lower
            .replace(/[^a-z0-9-]+/g, '-')
            .replace(/^-+|-+$/g, '')
            .slice(0, MAX_BASE - 13)
            .replace(/-+$/, '') || 'x'
        }-${hash(id, 12)}`;
  const stem = `sandbox-${base}`;
  return {
    base,
    pod: stem,
    files: `${stem}-files`,
    history: `${stem}-history`,
    secret: `${stem}-runner`,
    networkPolicy: stem,
  };
}

/** A label value as it is when it fits the grammar, else its hash. */
function labelValue(value: string): string {
  return value.length <= 63 && LABEL_VALUE.test(value) ? value : hash(value, 63);
}

function hash(value: string, length: number): string {
  return createHash('sha256').update(value).digest('hex').slice(0, length);
}

export function sandboxLabels(spec: SandboxSpec): Record<string, string> {
  return {
    'app.kubernetes.io/part-of': 'aileron',
    'app.kubernetes.io/component': 'sandbox',
    [ORGANIZATION_LABEL]: labelValue(spec.organizationId),
    [WORKSPACE_LABEL]: labelValue(spec.workspaceId),
    [SANDBOX_LABEL]: sandboxNames(spec.id).base,
  };
}

/** Labels select; the id and the name as they are (any string) go in annotations. */
function metadata(spec: SandboxSpec, name: string, options: SandboxManifestOptions): V1ObjectMeta {
  return {
    name,
    namespace: options.namespace,
    labels: sandboxLabels(spec),
    annotations: { 'ai.aileron/sandbox-id': spec.id, 'ai.aileron/sandbox-name': spec.name },
  };
}

function claim(
  spec: SandboxSpec,
  name: string,
  size: string,
  options: SandboxManifestOptions,
): V1PersistentVolumeClaim {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: metadata(spec, name, options),
    spec: {
      // one pod mounts them, and both containers of a pod are on one node
      accessModes: ['ReadWriteOnce'],
      volumeMode: 'Filesystem',
      resources: { requests: { storage: size } },
      ...(options.storage.storageClassName ? { storageClassName: options.storage.storageClassName } : {}),
    },
  };
}

export function filesClaimManifest(spec: SandboxSpec, options: SandboxManifestOptions): V1PersistentVolumeClaim {
  return claim(spec, sandboxNames(spec.id).files, options.storage.files, options);
}

export function historyClaimManifest(spec: SandboxSpec, options: SandboxManifestOptions): V1PersistentVolumeClaim {
  return claim(spec, sandboxNames(spec.id).history, options.storage.history, options);
}

/**
 * The runners' tokens, for the sandbox's whole life: a control plane that
 * restarts reads them back to reach the pods it left running. Two, so that
 * the agent, who can read its own runner's environment (same user), never
 * holds the history runner's.
 */
export function secretManifest(spec: SandboxSpec, tokens: RunnerTokens, options: SandboxManifestOptions): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: metadata(spec, sandboxNames(spec.id).secret, options),
    type: 'Opaque',
    immutable: true,
    stringData: { [TOKEN_KEYS.sandbox]: tokens.sandbox, [TOKEN_KEYS.history]: tokens.history },
  };
}

/**
 * Only the control plane may connect, and only to the runners. `none`: no
 * egress at all, not even DNS; `egress`: the public internet and the
 * cluster's DNS, never the cluster itself (egressRules, as the pool's pods). A pod's
 * containers talk over its loopback, which no NetworkPolicy governs: the
 * history runner's token guards it there.
 */
export function networkPolicyManifest(spec: SandboxSpec, options: SandboxManifestOptions): V1NetworkPolicy {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: metadata(spec, sandboxNames(spec.id).networkPolicy, options),
    spec: {
      podSelector: { matchLabels: { [SANDBOX_LABEL]: sandboxNames(spec.id).base } },
      policyTypes: ['Ingress', 'Egress'],
      egress: spec.network === 'egress' ? egressRules(options.egressAllowCidrs, options.egressExceptCidrs) : [],
      ingress: [
        {
          // the client's model name for `from`; its serializer writes `from`
          _from: [controlPlanePeer(options.namespace, options.controlPlaneNamespace)],
          ports: [
            { protocol: 'TCP', port: options.ports.sandbox },
            { protocol: 'TCP', port: options.ports.history },
          ],
        },
      ],
    },
  };
}

/** requests = limits, as the pool's pods: what the scheduler reserves is what the sandbox gets */
function resources(cpu: string, memory: string): V1ResourceRequirements {
  return { requests: { cpu, memory }, limits: { cpu, memory } };
}

function tokenEnv(secret: string, key: string): V1EnvVar {
  // from the Secret by reference: a Pod spec is readable by anyone who may list pods
  return { name: RUNNER_TOKEN_ENV, valueFrom: { secretKeyRef: { name: secret, key } } };
}

/** The agent's container: the runner, with what it may mount. */
function agentContainer(
  spec: SandboxSpec,
  options: SandboxManifestOptions,
  volumeMounts: V1VolumeMount[],
): V1Container {
  const memory = spec.limits.memoryMb ? `${spec.limits.memoryMb}Mi` : options.sandboxResources.memory;
  // the sandbox's cpuSeconds and pids are per command (the runner's rlimits): the Pod API has no pids limit of its own
  return {
    name: SANDBOX_CONTAINER,
    image: options.image,
    args: ['node', RUNNER_PATH, '--listen', String(options.ports.sandbox)],
    ports: [{ name: 'runner', containerPort: options.ports.sandbox, protocol: 'TCP' }],
    env: [tokenEnv(sandboxNames(spec.id).secret, TOKEN_KEYS.sandbox), { name: 'HOME', value: SANDBOX_HOME }],
    resources: resources(options.sandboxResources.cpu, memory),
    securityContext: restrictedContainerSecurityContext(),
    // a connection the runner refuses without its token: a probe cannot carry one without putting it in the Pod spec
    readinessProbe: { tcpSocket: { port: 'runner' }, periodSeconds: 2, failureThreshold: 3 },
    volumeMounts,
    workingDir: SANDBOX_WORKDIR,
  };
}

export function podManifest(spec: SandboxSpec, options: SandboxManifestOptions): V1Pod {
  const names = sandboxNames(spec.id);
  // never the history: what the agent runs must not reach the snapshots' git directory
  const sandbox = agentContainer(spec, options, [
    { name: 'files', mountPath: SANDBOX_WORKDIR },
    { name: 'tmp', mountPath: '/tmp' },
    { name: 'home', mountPath: SANDBOX_HOME },
  ]);
  const history: V1Container = {
    name: HISTORY_CONTAINER,
    image: options.image,
    args: ['node', RUNNER_PATH, '--role', 'history', '--listen', String(options.ports.history)],
    ports: [{ name: 'history', containerPort: options.ports.history, protocol: 'TCP' }],
    env: [tokenEnv(names.secret, TOKEN_KEYS.history), { name: 'HOME', value: SANDBOX_HOME }],
    resources: resources(options.historyResources.cpu, options.historyResources.memory),
    securityContext: restrictedContainerSecurityContext(),
    readinessProbe: { tcpSocket: { port: 'history' }, periodSeconds: 2, failureThreshold: 3 },
    // never the agent's files: git here builds snapshots from what the agent's runner sends, and never reads /src;
    // its own scratch space: nothing the agent leaves in /tmp is seen by git
    volumeMounts: [
      { name: 'history', mountPath: HISTORY_DIR },
      { name: 'history-tmp', mountPath: '/tmp' },
      { name: 'history-home', mountPath: SANDBOX_HOME },
    ],
    workingDir: HISTORY_DIR,
  };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: metadata(spec, names.pod, options),
    spec: {
      // a runner that ends never comes back on its own: the driver notices (a container ended) and starts a whole new pod,
      // and no port of a dead runner stays open for the agent's processes to take over
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 10,
      // no shared process namespace: the agent must not read the history runner's environment
      shareProcessNamespace: false,
      // OnRootMismatch: a large /src is not walked to change its group at every start
      securityContext: { ...restrictedPodSecurityContext(), fsGroupChangePolicy: 'OnRootMismatch' },
      containers: [sandbox, history],
      volumes: [
        { name: 'files', persistentVolumeClaim: { claimName: names.files } },
        { name: 'history', persistentVolumeClaim: { claimName: names.history } },
        { name: 'tmp', emptyDir: { sizeLimit: options.scratchSize } },
        { name: 'home', emptyDir: { sizeLimit: options.scratchSize } },
        { name: 'history-tmp', emptyDir: { sizeLimit: options.scratchSize } },
        { name: 'history-home', emptyDir: { sizeLimit: options.scratchSize } },
      ],
    },
  };
}

/** On a restricted runner's pod: the base of the sandbox whose files it mounts (stop and remove find its pods by it). */
export const RESTRICTED_OF_LABEL = 'ai.aileron/restricted-of';

/**
 * What a client's sandbox policy leaves one command, as the mounts of a pod
 * of its own (a restricted pod cannot narrow a command inside itself: no
 * capability, no user namespace). Chosen when the pod starts, for every
 * command under the same policy.
 */
export interface RestrictedLayout {
  /** `rw`: /src writable whole; `ro`: read-only but for `writable` */
  src: 'rw' | 'ro';
  /** subpaths of /src (no leading slash) mounted again writable, from the files claim */
  writable: string[];
  /** subpaths inside those kept read-only (a top-level .git or .codex, as Codex keeps them) */
  readOnly: string[];
  /** a /tmp of its own, writable; false: the image's, read-only */
  tmp: boolean;
  /** a home directory of its own, writable; false: the image's, read-only */
  home: boolean;
  /** a writable TMPDIR apart from /tmp (an emptyDir there); null: none */
  tmpdir: string | null;
  /** egress as the sandbox has it (never more); false: none at all */
  network: boolean;
}

export interface RestrictedNames {
  /** short digest of the layout: one pod per sandbox and layout */
  key: string;
  /** its `ai.aileron/sandbox` label value: the driver's watch sees it, the sandbox's own NetworkPolicy does not select it */
  label: string;
  pod: string;
  networkPolicy: string;
}

export function restrictedNames(id: string, layout: RestrictedLayout): RestrictedNames {
  const base = sandboxNames(id).base;
  const key = hash(JSON.stringify(layout), 10);
  const label = `${base}-r${key}`;
  return { key, label, pod: `sandbox-${label}`, networkPolicy: `sandbox-${label}` };
}

/**
 * The pod of a restricted runner: the agent's container alone (no history),
 * beside the sandbox's pod on its node (the files claim is ReadWriteOnce),
 * /src from the files claim read-only with the writable roots mounted again
 * read-write (subPath: the kubelet refuses a path that leaves the volume by a
 * link), scratch directories only where the policy allows writes.
 */
export function restrictedPodManifest(
  spec: SandboxSpec,
  layout: RestrictedLayout,
  options: SandboxManifestOptions,
): V1Pod {
  const names = sandboxNames(spec.id);
  const restricted = restrictedNames(spec.id, layout);
  const mounts: V1VolumeMount[] = [{ name: 'files', mountPath: SANDBOX_WORKDIR, readOnly: layout.src === 'ro' }];
  if (layout.src === 'ro')
    for (const path of layout.writable)
      mounts.push({ name: 'files', mountPath: `${SANDBOX_WORKDIR}/${path}`, subPath: path });
  for (const path of layout.readOnly)
    mounts.push({ name: 'files', mountPath: `${SANDBOX_WORKDIR}/${path}`, subPath: path, readOnly: true });
  const volumes: V1Volume[] = [{ name: 'files', persistentVolumeClaim: { claimName: names.files } }];
  const scratch = (name: string, mountPath: string): void => {
    volumes.push({ name, emptyDir: { sizeLimit: options.scratchSize } });
    mounts.push({ name, mountPath });
  };
  if (layout.tmp) scratch('tmp', '/tmp');
  if (layout.tmpdir) scratch('tmpdir', layout.tmpdir);
  if (layout.home) scratch('home', SANDBOX_HOME);
  const sandbox = agentContainer(spec, options, mounts);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      ...metadata(spec, restricted.pod, options),
      labels: {
        ...sandboxLabels(spec),
        'app.kubernetes.io/component': 'sandbox-restricted',
        [SANDBOX_LABEL]: restricted.label,
        [RESTRICTED_OF_LABEL]: names.base,
      },
    },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 10,
      securityContext: { ...restrictedPodSecurityContext(), fsGroupChangePolicy: 'OnRootMismatch' },
      affinity: {
        podAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: [
            { labelSelector: { matchLabels: { [SANDBOX_LABEL]: names.base } }, topologyKey: 'kubernetes.io/hostname' },
          ],
        },
      },
      containers: [sandbox],
      volumes,
    },
  };
}

/** Only the control plane may connect, to the runner; egress as the sandbox's, or none when the policy takes the network. */
export function restrictedNetworkPolicyManifest(
  spec: SandboxSpec,
  layout: RestrictedLayout,
  options: SandboxManifestOptions,
): V1NetworkPolicy {
  const restricted = restrictedNames(spec.id, layout);
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {
      ...metadata(spec, restricted.networkPolicy, options),
      labels: {
        ...sandboxLabels(spec),
        [SANDBOX_LABEL]: restricted.label,
        [RESTRICTED_OF_LABEL]: sandboxNames(spec.id).base,
      },
    },
    spec: {
      podSelector: { matchLabels: { [SANDBOX_LABEL]: restricted.label } },
      policyTypes: ['Ingress', 'Egress'],
      egress:
        layout.network && spec.network === 'egress'
          ? egressRules(options.egressAllowCidrs, options.egressExceptCidrs)
          : [],
      ingress: [
        {
          _from: [controlPlanePeer(options.namespace, options.controlPlaneNamespace)],
          ports: [{ protocol: 'TCP', port: options.ports.sandbox }],
        },
      ],
    },
  };
}

export function sandboxManifests(
  spec: SandboxSpec,
  tokens: RunnerTokens,
  options: SandboxManifestOptions,
): SandboxManifests {
  return {
    files: filesClaimManifest(spec, options),
    history: historyClaimManifest(spec, options),
    secret: secretManifest(spec, tokens, options),
    networkPolicy: networkPolicyManifest(spec, options),
    pod: podManifest(spec, options),
  };
}
