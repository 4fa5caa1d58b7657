import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Ajv from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ADMIN_TOKEN_FILE, loadConfig, SETTINGS } from '@aileron/config';
import { CONTROL_PLANE_SELECTOR } from '@aileron/kubernetes';
import { EGRESS_EXCEPT_V4 } from '@aileron/net';
import type { InstanceSpec } from '@aileron/pool';
import { KubernetesDriver, kubernetesPoolOptions, MANAGED_BY } from '@aileron/pool/kubernetes';
import { SNAPSHOT_BRANCH, takeSnapshot, type SandboxSpec } from '@aileron/sandboxes';
import {
  KubernetesSandboxDriver,
  kubernetesSandboxOptions,
  SANDBOX_RUNNER_PORTS,
  SANDBOX_SELECTOR,
} from '@aileron/sandboxes/kubernetes';
import { FakeKubernetes } from '../support/fake-kubernetes';
import { ProcessKubelet } from '../support/process-kubelet';
import { listenOnPodIP, runnerPorts, SANDBOX_VERSION, sandboxImageMaker } from '../support/sandbox-pods';
import {
  CHART,
  ensureRenderer,
  find,
  mergedValues,
  notes,
  one,
  podTemplates,
  render,
  renderError,
  type K8sObject,
  type Rendered,
} from './chart';
import { callsMade, grantsOf, refuseOutside } from './rbac';
import { codeSpans, documentedSettings, readmeSection, ROOT, serverModeCommand, shellLines, tableRows } from './readme';

/**
 * The Helm chart, rendered by the engine Helm runs (scripts/helm-render: Go's
 * text/template and sprig) for several value sets, each object validated
 * against the Kubernetes schemas (kubernetes-models) and held to the
 * security properties on the rendered objects themselves. The pool's and the
 * sandboxes' Roles are held to what their Kubernetes drivers really call, by
 * running each driver against a fake API server that allows exactly the
 * Role's rules.
 */

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
const chartMeta = parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as {
  name: string;
  version: string;
  appVersion: string;
};
const schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8')) as object;

const RELEASE_NS = 'aileron';
const POOL_NS = 'aileron-pool';
const SANDBOX_NS = 'aileron-sandboxes';
const ROOT_KEY = Buffer.alloc(32, 7).toString('base64');
const POD_UID = randomUUID();

const VALUE_SETS: Record<string, object> = {
  'default (embedded)': {},
  'server mode with ingress, HPA and ServiceMonitor': {
    mode: 'server',
    secrets: {
      databaseUrl: 'postgres://aileron:secret@db.example.internal:5432/aileron',
      redisUrl: 'redis://redis.example.internal:6379',
      rootKeys: ROOT_KEY,
    },
    ingress: {
      enabled: true,
      className: 'nginx',
      hosts: [{ host: 'aileron.example.com', paths: [{ path: '/', pathType: 'Prefix' }] }],
      tls: [{ secretName: 'aileron-tls', hosts: ['aileron.example.com'] }],
    },
    autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 12 },
    metrics: { serviceMonitor: { enabled: true, labels: { release: 'prometheus' } } },
    config: { AILERON_POOL_IDLE_SECONDS: 300, DATABASE_POOL_SIZE: '20' },
  },
  'pool on Kubernetes (server mode, existing Secret)': {
    mode: 'server',
    secrets: { existingSecret: 'aileron-operator-secrets' },
    pool: {
      driver: 'kubernetes',
      namespace: POOL_NS,
      egressAllowCidrs: ['10.20.0.0/16'],
      egressExceptCidrs: ['2001:db8:42::/56'],
    },
  },
  'sandboxes on Kubernetes (pool local)': {
    pool: { egressAllowCidrs: ['10.30.0.0/16'], egressExceptCidrs: ['2001:db8:43::/56'] },
    sandboxes: {
      driver: 'kubernetes',
      namespace: SANDBOX_NS,
      image: { repository: 'registry.example.com/acme/sandbox' },
      versionMismatch: 'warn',
      storage: { files: '20Gi', history: '3Gi', storageClass: 'fast-ssd' },
    },
  },
  'pool and sandboxes on Kubernetes': {
    mode: 'server',
    secrets: { existingSecret: 'aileron-operator-secrets' },
    pool: { driver: 'kubernetes', namespace: POOL_NS },
    sandboxes: { driver: 'kubernetes', namespace: SANDBOX_NS },
  },
};
const SETS = Object.keys(VALUE_SETS);
const rendered: Record<string, Rendered> = {};

/** The kubernetes-models class for an object (prometheus-operator's for ServiceMonitor). */
async function modelOf(object: K8sObject): Promise<new (data: K8sObject) => { validate(): void }> {
  const module: Record<string, unknown> = object.apiVersion.startsWith('monitoring.coreos.com/')
    ? await import(`@kubernetes-models/prometheus-operator/${object.apiVersion}`)
    : await import(`kubernetes-models/${object.apiVersion}`);
  const model = module[object.kind];
  if (typeof model !== 'function')
    throw new Error(`no kubernetes-models class for ${object.apiVersion} ${object.kind}`);
  return model as new (
    data: K8sObject,
  ) => { validate(): void };
}

function controlPlane(r: Rendered): K8sObject {
  return one(r, 'Deployment', 'aileron');
}

function container(deployment: K8sObject): K8sObject {
  return deployment.spec.template.spec.containers[0];
}

/** What a selector's matchLabels picks among labels. */
function selects(matchLabels: Record<string, string>, labels: Record<string, string>): boolean {
  return Object.entries(matchLabels).every(([key, value]) => labels?.[key] === value);
}

/**
 * The control plane's environment as the kubelet would give it (the ConfigMap, then the
 * Deployment's own variables, `$(VAR)` expanded), in RELEASE_NS.
 */
function controlPlaneEnv(set: string): Record<string, string> {
  const r = rendered[set]!;
  const env: Record<string, string> = { ...one(r, 'ConfigMap').data };
  const values = mergedValues(VALUE_SETS[set]!) as { secrets: Record<string, string> };
  const fromSecret: Record<string, string> = {
    'database-url': values.secrets.databaseUrl || 'postgres://u:p@db:5432/aileron',
    'redis-url': values.secrets.redisUrl || 'redis://redis:6379',
  };
  const field: Record<string, string> = {
    'metadata.name': 'aileron-5d8f7c9b6-x2x4q',
    'metadata.uid': POD_UID,
    'metadata.namespace': RELEASE_NS,
    'status.podIP': '10.1.2.3',
  };
  for (const variable of container(controlPlane(r)).env) {
    if (variable.value !== undefined)
      env[variable.name] = variable.value.replace(/\$\((\w+)\)/g, (_: string, ref: string) => env[ref] ?? '');
    else if (variable.valueFrom.fieldRef) env[variable.name] = field[variable.valueFrom.fieldRef.fieldPath]!;
    else env[variable.name] = fromSecret[variable.valueFrom.secretKeyRef.key]!;
  }
  return env;
}

/**
 * Whether a NetworkPolicy, by itself, lets a pod (its namespace and labels) connect to a
 * port of the pods it selects: a peer without a namespaceSelector means the policy's own
 * namespace, as the API server reads it.
 */
function admits(policy: K8sObject, from: { namespace: string; labels: Record<string, string> }, port: number): boolean {
  return (policy.spec.ingress ?? []).some((rule: K8sObject) => {
    const peers = (rule.from ?? []) as K8sObject[];
    const portAllowed = (rule.ports ?? []).some((p: K8sObject) => p.port === port);
    return (
      portAllowed &&
      peers.some((peer) => {
        const namespaceMatches = peer.namespaceSelector
          ? selects(peer.namespaceSelector.matchLabels ?? {}, { 'kubernetes.io/metadata.name': from.namespace })
          : from.namespace === policy.metadata.namespace;
        return namespaceMatches && selects(peer.podSelector?.matchLabels ?? {}, from.labels);
      })
    );
  });
}

/** The ranges a policy's `::/0` egress block leaves out. */
function ipv6Except(policy: K8sObject): string[] {
  const blocks = (policy.spec.egress as K8sObject[]).flatMap((rule) =>
    (rule.to ?? []).map((peer: K8sObject) => peer.ipBlock).filter(Boolean),
  );
  return blocks.find((block: K8sObject) => block.cidr === '::/0')?.except ?? [];
}

beforeAll(() => {
  ensureRenderer();
  for (const set of SETS)
    rendered[set] = render(VALUE_SETS[set]!, { namespace: RELEASE_NS, apiVersions: ['monitoring.coreos.com/v1'] });
}, 300_000);

describe('the chart', () => {
  it('is versioned with the control plane, and its default images are the ones the README and the configuration name', () => {
    expect(chartMeta.name).toBe('aileron');
    expect(chartMeta.version).toBe(pkg.version);
    expect(chartMeta.appVersion).toBe(pkg.version);
    const r = rendered['default (embedded)']!;
    const images = tableRows(readmeSection('Images')).map((cells) => codeSpans(cells[0]!)[0]!);
    expect(container(controlPlane(r)).image).toBe(`${images[0]}:${pkg.version}`);
    const pool = rendered['pool on Kubernetes (server mode, existing Secret)']!;
    expect(one(pool, 'ConfigMap').data.AILERON_POOL_RUNNER_IMAGE).toBe(SETTINGS.AILERON_POOL_RUNNER_IMAGE.default);
    expect(SETTINGS.AILERON_POOL_RUNNER_IMAGE.default).toBe(`${images[1]}:${pkg.version}`);
    // the sandboxes' image, as the driver would default it too (ghcr.io/aileron/sandbox-base:<version>)
    expect(one(render({ sandboxes: { driver: 'kubernetes' } }), 'ConfigMap').data.AILERON_SANDBOX_IMAGE).toBe(
      `${images[2]}:${pkg.version}`,
    );
  });

  it('documents every value in values.yaml, and values.schema.json accepts each value set and refuses misspelt or misplaced values', () => {
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(schema);
    for (const set of SETS)
      expect(validate(mergedValues(VALUE_SETS[set]!)), `${set}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    expect(validate(mergedValues({ replicas: 3 }))).toBe(false);
    expect(validate(mergedValues({ mode: 'cluster' }))).toBe(false);
    expect(validate(mergedValues({ pool: { driver: 'docker' } }))).toBe(false);
    // a secret must never land in the ConfigMap
    for (const secret of ['DATABASE_URL', 'REDIS_URL', 'AILERON_ROOT_KEY'])
      expect(validate(mergedValues({ config: { [secret]: 'x' } })), secret).toBe(false);
    expect(validate(mergedValues({ config: { AILERON_POOL_IDLE_SECONDS: '60' } }))).toBe(true);
    // every value is described: a top-level key by the comment above it, a nested one by its own or by the comment of the siblings it follows
    const lines = readFileSync(join(CHART, 'values.yaml'), 'utf8').split('\n');
    const undocumented = lines.flatMap((line, i) => {
      const key = /^( {0,2})[A-Za-z][\w.]*:/.exec(line);
      if (!key) return [];
      const previous = lines[i - 1] ?? '';
      const commented = /^\s*#/.test(previous);
      const grouped = key[1] === '  ' && /^ {2,}\S/.test(previous);
      return commented || grouped ? [] : [`line ${i + 1}: ${line.trim()}`];
    });
    expect(undocumented).toEqual([]);
  });

  describe.each(SETS)('%s', (set) => {
    it('renders objects that are valid against the Kubernetes schemas', async () => {
      const r = rendered[set]!;
      expect(r.objects.length).toBeGreaterThan(3);
      for (const object of r.objects) {
        const Model = await modelOf(object);
        expect(() => new Model(object).validate(), `${object.kind}/${object.metadata?.name}`).not.toThrow();
      }
    });

    it("creates nothing cluster-wide but the pool's and the sandboxes' namespaces, names every object it puts outside the release namespace, and nothing twice", () => {
      const r = rendered[set]!;
      for (const object of r.objects) {
        expect([
          'ClusterRole',
          'ClusterRoleBinding',
          'PodSecurityPolicy',
          'MutatingWebhookConfiguration',
          'ValidatingWebhookConfiguration',
        ]).not.toContain(object.kind);
        if (object.kind === 'Namespace') expect([POOL_NS, SANDBOX_NS]).toContain(object.metadata.name);
        else if (object.metadata.namespace !== undefined)
          expect([POOL_NS, SANDBOX_NS], `${object.kind}/${object.metadata.name}`).toContain(object.metadata.namespace);
      }
      const keys = r.objects.map((o) => `${o.kind} ${o.metadata.namespace ?? RELEASE_NS}/${o.metadata.name}`);
      expect(keys.filter((key, i) => keys.indexOf(key) !== i)).toEqual([]);
    });

    it('runs every pod non-root, with a read-only root file system, no privilege escalation, all capabilities dropped and seccomp RuntimeDefault', () => {
      const templates = podTemplates(rendered[set]!);
      expect(templates.length).toBeGreaterThan(0);
      for (const { owner, spec } of templates) {
        expect(spec.securityContext.runAsNonRoot, owner).toBe(true);
        expect(spec.securityContext.runAsUser, owner).toBeGreaterThan(0);
        expect(spec.securityContext.seccompProfile, owner).toEqual({ type: 'RuntimeDefault' });
        expect(spec.hostNetwork ?? false, owner).toBe(false);
        expect(spec.hostPID ?? false, owner).toBe(false);
        expect(spec.enableServiceLinks, owner).toBe(false);
        for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
          const where = `${owner} ${c.name}`;
          expect(c.securityContext.allowPrivilegeEscalation, where).toBe(false);
          expect(c.securityContext.readOnlyRootFilesystem, where).toBe(true);
          expect(c.securityContext.runAsNonRoot, where).toBe(true);
          expect(c.securityContext.privileged ?? false, where).toBe(false);
          expect(c.securityContext.capabilities, where).toEqual({ drop: ['ALL'] });
          expect(c.securityContext.runAsUser ?? spec.securityContext.runAsUser, where).toBeGreaterThan(0);
          // the image's ENTRYPOINT (tini) stays: only its CMD is replaced
          expect(c.command, where).toBeUndefined();
          // writes only to the data dir and /tmp, both volumes of the pod's own
          const writable = (c.volumeMounts ?? [])
            .filter((m: K8sObject) => m.readOnly !== true)
            .map((m: K8sObject) => m.mountPath)
            .sort();
          expect(writable, where).toEqual(['/tmp', '/var/lib/aileron']);
        }
        for (const volume of spec.volumes ?? [])
          expect(volume.hostPath, `${owner} volume ${volume.name}`).toBeUndefined();
      }
    });

    it("runs the README's commands, with only the settings the configuration knows, which it accepts", () => {
      const r = rendered[set]!;
      const documented = new Set(documentedSettings());
      const configMap = one(r, 'ConfigMap');
      for (const name of Object.keys(configMap.data)) {
        expect(SETTINGS, `ConfigMap ${name}`).toHaveProperty(name);
        expect(documented.has(name), `ConfigMap ${name} in the README`).toBe(true);
      }
      const commands: Record<string, string[]> = {
        aileron: serverModeCommand('dist/apps/control-plane/src/main.js'),
        'aileron-worker': serverModeCommand('dist/apps/worker/src/main.js'),
        'aileron-migrate': serverModeCommand('bin/aileron-cp.js', 'migrate'),
      };
      for (const object of [...find(r, 'Deployment'), ...find(r, 'Job')]) {
        const c = container(object);
        expect(c.args, object.metadata.name).toEqual(commands[object.metadata.name]);
        expect(c.image).toBe(container(controlPlane(r)).image);
        for (const { name } of c.env ?? []) {
          // POD_IP only spells AILERON_REPLICA_URL (`$(POD_IP)`)
          if (name === 'POD_IP') continue;
          expect(SETTINGS, `${object.metadata.name}: ${name}`).toHaveProperty(name);
          expect(documented.has(name), `${object.metadata.name}: ${name} in the README`).toBe(true);
        }
      }
      // the control plane's environment as the kubelet would give it, checked by the control plane's own configuration loader
      const env = controlPlaneEnv(set);
      const config = loadConfig(env);
      expect(config.mode).toBe((mergedValues(VALUE_SETS[set]!) as { mode: string }).mode);
      expect(config.host).toBe('0.0.0.0');
      expect(config.port).toBe(container(controlPlane(r)).ports[0].containerPort);
      expect(env.AILERON_REPLICA_URL).toBe('http://10.1.2.3:8080');
    });

    it('gives the control plane its own Pod name, UID and address (downward API), and probes /healthz and /readyz', () => {
      const deployment = controlPlane(rendered[set]!);
      const c = container(deployment);
      const env = Object.fromEntries(c.env.map((v: K8sObject) => [v.name, v]));
      expect(env.AILERON_POD_NAME.valueFrom).toEqual({ fieldRef: { fieldPath: 'metadata.name' } });
      expect(env.AILERON_POD_UID.valueFrom).toEqual({ fieldRef: { fieldPath: 'metadata.uid' } });
      expect(env.AILERON_POD_NAMESPACE.valueFrom).toEqual({ fieldRef: { fieldPath: 'metadata.namespace' } });
      expect(loadConfig(controlPlaneEnv(set)).pool.controlPlaneNamespace).toBe(RELEASE_NS);
      expect(env.POD_IP.valueFrom).toEqual({ fieldRef: { fieldPath: 'status.podIP' } });
      // $(POD_IP) expands only from a variable defined before it
      const names = c.env.map((v: K8sObject) => v.name);
      expect(names.indexOf('POD_IP')).toBeLessThan(names.indexOf('AILERON_REPLICA_URL'));
      expect(env.AILERON_REPLICA_URL.value).toBe(`http://$(POD_IP):${c.ports[0].containerPort}`);
      expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
      expect(c.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
      expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
      expect(c.ports).toEqual([{ name: 'http', containerPort: 8080, protocol: 'TCP' }]);
      expect(c.resources.requests).toBeDefined();
      // the pool admits connections to instances only from pods labelled so
      expect(selects(CONTROL_PLANE_SELECTOR, deployment.spec.template.metadata.labels)).toBe(true);
      expect(selects(deployment.spec.selector.matchLabels, deployment.spec.template.metadata.labels)).toBe(true);
    });

    it('mounts the root key as a file, never as an environment value, and keeps URLs in a Secret', () => {
      const r = rendered[set]!;
      for (const { owner, spec } of podTemplates(r)) {
        for (const c of spec.containers) {
          for (const variable of c.env ?? []) {
            expect(variable.name, owner).not.toBe('AILERON_ROOT_KEY');
            if (['DATABASE_URL', 'REDIS_URL'].includes(variable.name))
              expect(variable.valueFrom?.secretKeyRef, `${owner} ${variable.name}`).toBeDefined();
          }
        }
      }
      const configMap = JSON.stringify(one(r, 'ConfigMap'));
      expect(configMap).not.toMatch(/postgres:\/\/|redis:\/\/|rediss:\/\//);
      expect(configMap).not.toContain(ROOT_KEY);
    });
  });
});

describe('embedded mode (no values)', () => {
  const r = () => rendered['default (embedded)']!;

  it('runs one replica, never two at once, on a PersistentVolumeClaim, with the jobs in-process', () => {
    const deployment = controlPlane(r());
    expect(deployment.spec.replicas).toBe(1);
    expect(deployment.spec.strategy).toEqual({ type: 'Recreate' });
    const data = deployment.spec.template.spec.volumes.find((v: K8sObject) => v.name === 'data');
    const claim = one(r(), 'PersistentVolumeClaim');
    expect(data.persistentVolumeClaim.claimName).toBe(claim.metadata.name);
    expect(claim.metadata.annotations['helm.sh/resource-policy']).toBe('keep');
    expect(one(r(), 'ConfigMap').data.DATABASE_URL).toBeUndefined();
    for (const kind of [
      'Job',
      'HorizontalPodAutoscaler',
      'PodDisruptionBudget',
      'Secret',
      'Role',
      'NetworkPolicy',
      'Ingress',
    ])
      expect(find(r(), kind), kind).toEqual([]);
    expect(find(r(), 'Deployment')).toHaveLength(1);
  });

  it('mounts no service-account token: it does not call the Kubernetes API', () => {
    expect(controlPlane(r()).spec.template.spec.automountServiceAccountToken).toBe(false);
    expect(one(r(), 'ServiceAccount').automountServiceAccountToken).toBe(false);
  });

  it('tells in NOTES.txt where the first owner token is', () => {
    const text = notes({}, { namespace: RELEASE_NS });
    const dataDir = one(r(), 'ConfigMap').data.AILERON_DATA_DIR;
    expect(text).toContain(`kubectl -n ${RELEASE_NS} exec deploy/aileron -- cat ${dataDir}/${ADMIN_TOKEN_FILE}`);
    expect(text).toContain('port-forward svc/aileron');
  });
});

describe('server mode with ingress, HPA and ServiceMonitor', () => {
  const set = 'server mode with ingress, HPA and ServiceMonitor';
  const r = () => rendered[set]!;

  it('leaves the replicas to the HorizontalPodAutoscaler and keeps one replica down at most', () => {
    const deployment = controlPlane(r());
    expect(deployment.spec.replicas).toBeUndefined();
    const hpa = one(r(), 'HorizontalPodAutoscaler');
    expect(hpa.spec.scaleTargetRef).toEqual({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: deployment.metadata.name,
    });
    expect([hpa.spec.minReplicas, hpa.spec.maxReplicas]).toEqual([3, 12]);
    const pdb = one(r(), 'PodDisruptionBudget');
    expect(pdb.spec.maxUnavailable).toBe(1);
    expect(selects(pdb.spec.selector.matchLabels, deployment.spec.template.metadata.labels)).toBe(true);
  });

  it('runs the worker apart, and migrates in a hook Job before install and upgrade, after the Secret it reads', () => {
    const worker = one(r(), 'Deployment', 'aileron-worker');
    expect(worker.spec.template.spec.automountServiceAccountToken).toBe(false);
    const job = one(r(), 'Job');
    const secret = one(r(), 'Secret');
    expect(job.metadata.annotations['helm.sh/hook']).toBe('pre-install,pre-upgrade');
    expect(secret.metadata.annotations['helm.sh/hook']).toBe('pre-install,pre-upgrade');
    expect(Number(secret.metadata.annotations['helm.sh/hook-weight'])).toBeLessThan(
      Number(job.metadata.annotations['helm.sh/hook-weight']),
    );
    expect(container(job).env.find((v: K8sObject) => v.name === 'DATABASE_URL').valueFrom.secretKeyRef.name).toBe(
      secret.metadata.name,
    );
    expect(job.spec.template.spec.restartPolicy).toBe('Never');
    expect(Object.keys(secret.stringData).sort()).toEqual(['database-url', 'redis-url', 'root-keys']);
  });

  it('routes the ingress host to the Service, which selects the control plane only; the public URL is the ingress host', () => {
    const service = one(r(), 'Service');
    const ingress = one(r(), 'Ingress');
    const backend = ingress.spec.rules[0].http.paths[0].backend.service;
    expect(backend).toEqual({ name: service.metadata.name, port: { name: 'http' } });
    expect(service.spec.ports[0].targetPort).toBe('http');
    expect(selects(service.spec.selector, controlPlane(r()).spec.template.metadata.labels)).toBe(true);
    expect(selects(service.spec.selector, one(r(), 'Deployment', 'aileron-worker').spec.template.metadata.labels)).toBe(
      false,
    );
    expect(one(r(), 'ConfigMap').data.AILERON_PUBLIC_URL).toBe('https://aileron.example.com');
  });

  it('scrapes /metrics through the Service with a ServiceMonitor', () => {
    const monitor = one(r(), 'ServiceMonitor');
    expect(selects(monitor.spec.selector.matchLabels, one(r(), 'Service').metadata.labels)).toBe(true);
    expect(monitor.spec.endpoints).toEqual([{ port: 'http', path: '/metrics', interval: '30s' }]);
    expect(monitor.metadata.labels.release).toBe('prometheus');
  });

  it('takes a templated public URL, and refuses a ServiceMonitor where the cluster has no prometheus-operator', () => {
    const templated = render({ publicUrl: 'https://{{ .Release.Name }}.example.com' }, { name: 'acme' });
    expect(one(templated, 'ConfigMap').data.AILERON_PUBLIC_URL).toBe('https://acme.example.com');
    expect(renderError({ metrics: { serviceMonitor: { enabled: true } } })).toMatch(/monitoring\.coreos\.com\/v1/);
  });

  it('refuses a server mode without its database, Redis or root key, naming the value', () => {
    expect(renderError({ mode: 'server' })).toMatch(/secrets\.databaseUrl/);
    expect(renderError({ mode: 'server', secrets: { databaseUrl: 'postgres://a@b/c' } })).toMatch(/secrets\.redisUrl/);
    expect(
      renderError({ mode: 'server', secrets: { databaseUrl: 'postgres://a@b/c', redisUrl: 'redis://r' } }),
    ).toMatch(/secrets\.rootKeys/);
  });

  it('tells in NOTES.txt how to make the first owner token', () => {
    const text = notes(VALUE_SETS[set]!, { namespace: RELEASE_NS });
    expect(text).toContain(
      `kubectl -n ${RELEASE_NS} exec deploy/aileron -- ${serverModeCommand('bin/aileron-cp.js', 'bootstrap').join(' ')}`,
    );
    expect(text).toContain('https://aileron.example.com/v1/me');
  });
});

describe('pool on Kubernetes', () => {
  const set = 'pool on Kubernetes (server mode, existing Secret)';
  const r = () => rendered[set]!;

  it("makes the pool's namespace enforce the restricted Pod Security Standard", () => {
    const namespace = one(r(), 'Namespace');
    expect(namespace.metadata.name).toBe(POOL_NS);
    expect(namespace.metadata.labels['pod-security.kubernetes.io/enforce']).toBe('restricted');
    expect(one(r(), 'ConfigMap').data.AILERON_K8S_NAMESPACE).toBe(POOL_NS);
  });

  it("binds a Role in the pool's namespace to the control plane's ServiceAccount, and mounts its token there only", () => {
    const role = one(r(), 'Role');
    const binding = one(r(), 'RoleBinding');
    expect(find(rendered['default (embedded)']!, 'Role')).toEqual([]);
    expect(controlPlane(rendered['default (embedded)']!).spec.template.spec.automountServiceAccountToken).toBe(false);
    const deployment = controlPlane(r());
    expect(role.metadata.namespace).toBe(POOL_NS);
    expect(binding.metadata.namespace).toBe(POOL_NS);
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata.name });
    expect(binding.subjects).toEqual([
      { kind: 'ServiceAccount', name: deployment.spec.template.spec.serviceAccountName, namespace: RELEASE_NS },
    ]);
    expect(one(r(), 'ServiceAccount').metadata.name).toBe(deployment.spec.template.spec.serviceAccountName);
    expect(deployment.spec.template.spec.automountServiceAccountToken).toBe(true);
    expect(one(r(), 'Deployment', 'aileron-worker').spec.template.spec.automountServiceAccountToken).toBe(false);
    expect(one(r(), 'Job').spec.template.spec.automountServiceAccountToken).toBe(false);
  });

  it('denies all traffic in the pool namespace but what the control plane of this release sends to an instance', () => {
    const policies = find(r(), 'NetworkPolicy');
    expect(policies.every((p) => p.metadata.namespace === POOL_NS)).toBe(true);
    const deny = policies.find((p) => Object.keys(p.spec.podSelector).length === 0);
    expect(deny?.spec).toEqual({ podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
    const admit = policies.find((p) => p !== deny)!;
    expect(admit.spec.podSelector.matchLabels).toEqual(MANAGED_BY);
    expect(admit.spec.policyTypes).toEqual(['Ingress']);
    const [rule] = admit.spec.ingress;
    expect(rule.from).toHaveLength(1);
    const [peer] = rule.from;
    expect(peer.namespaceSelector.matchLabels).toEqual({ 'kubernetes.io/metadata.name': RELEASE_NS });
    expect(selects(peer.podSelector.matchLabels, controlPlane(r()).spec.template.metadata.labels)).toBe(true);
    expect(
      selects(peer.podSelector.matchLabels, one(r(), 'Deployment', 'aileron-worker').spec.template.metadata.labels),
    ).toBe(false);
    // the bridge's port in the driver's pods
    expect(rule.ports).toEqual([{ protocol: 'TCP', port: 8080 }]);
  });

  it('bounds what the instances take together (ResourceQuota) and one at a time (LimitRange)', () => {
    const quota = one(r(), 'ResourceQuota');
    expect(quota.metadata.namespace).toBe(POOL_NS);
    expect(quota.spec.hard.pods).toBeDefined();
    const limits = one(r(), 'LimitRange');
    expect(limits.metadata.namespace).toBe(POOL_NS);
    expect(limits.spec.limits[0].max).toBeDefined();
  });

  it('refuses the release namespace as the pool namespace', () => {
    expect(renderError({ pool: { driver: 'kubernetes', namespace: RELEASE_NS } }, { namespace: RELEASE_NS })).toMatch(
      /pool\.namespace/,
    );
  });

  describe("the Role against the driver's calls", () => {
    let fake: FakeKubernetes;
    let server: Server;
    let port: number;
    const lines: string[] = [];

    beforeAll(async () => {
      // what stands in for the bridge in the pod: the fake kubelet's TCP readiness probe connects to it
      server = createServer((socket) => socket.destroy());
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      port = (server.address() as { port: number }).port;
      fake = await FakeKubernetes.start({ namespace: POOL_NS, kubelet: { podIP: '127.0.0.1' } });
    });
    afterAll(async () => {
      await fake?.close();
      await new Promise((resolve) => server?.close(resolve));
    });

    function spec(): InstanceSpec {
      return {
        id: `memory-${randomUUID().slice(0, 8)}`,
        organizationId: randomUUID(),
        organizationSlug: 'acme',
        workspaceId: randomUUID(),
        workspaceSlug: 'platform',
        server: 'memory',
        version: '1.0.0',
        run: { kind: 'command', command: 'npx', args: ['-y', '@modelcontextprotocol/server-memory'] },
        env: {},
        secrets: [],
        limits: { memoryMb: 256, cpuMillis: 250 },
      };
    }

    it('allows every call the driver makes through a start, a stop and a restart that reaps, and nothing it does not make', async () => {
      const allowed = refuseOutside(fake, one(r(), 'Role', 'aileron-pool'));
      // the driver as the control plane builds it from its environment in the chart's pod
      const options = {
        ...kubernetesPoolOptions(loadConfig(controlPlaneEnv(set))),
        kubeConfig: fake.kubeConfig(),
        port,
        startTimeoutMs: 15_000,
        retryIntervalMs: 40,
        log: (line: string) => lines.push(line),
      };
      const first = new KubernetesDriver(options);
      const started = spec();
      const stopped = await first.start(started);
      expect(await stopped.healthy()).toBe(true);
      // the instance's own policy keeps it from the cluster's ranges and lets the configured ones through
      const policy = fake.get('networkpolicies', `mcp-${started.id}`);
      const egress = JSON.stringify(policy.spec.egress);
      for (const range of EGRESS_EXCEPT_V4) expect(egress).toContain(range);
      expect(egress).toContain('10.20.0.0/16');
      // the cluster's global IPv6 range, from the chart's value, is kept out as the private ranges are
      expect(ipv6Except(policy)).toContain('2001:db8:42::/56');
      // and admits this release's control plane from its own namespace by itself, and nothing else of the release
      expect(
        admits(policy, { namespace: RELEASE_NS, labels: controlPlane(r()).spec.template.metadata.labels }, port),
      ).toBe(true);
      expect(
        admits(
          policy,
          { namespace: RELEASE_NS, labels: one(r(), 'Deployment', 'aileron-worker').spec.template.metadata.labels },
          port,
        ),
      ).toBe(false);
      expect(
        admits(policy, { namespace: 'elsewhere', labels: controlPlane(r()).spec.template.metadata.labels }, port),
      ).toBe(false);
      await stopped.stop();
      // a replica that dies with an instance running; its next run reaps it
      await first.start(spec());
      const restarted = new KubernetesDriver(options);
      const next = await restarted.start(spec());
      await next.stop();
      await restarted.close();
      await first.close();
      expect(lines.join('\n')).not.toMatch(/forbidden|answered 403/i);
      expect(lines.join('\n')).toMatch(/deleted 1 pod\(s\) an earlier run of this replica left/);

      expect([...callsMade(fake)].sort()).toEqual([...allowed].sort());
    }, 120_000);
  });
});

describe('sandboxes on Kubernetes', () => {
  const set = 'sandboxes on Kubernetes (pool local)';
  const r = () => rendered[set]!;
  const both = () => rendered['pool and sandboxes on Kubernetes']!;

  /** A selector's matchLabels and matchExpressions (Exists, DoesNotExist) against labels. */
  function selectsPod(selector: K8sObject, labels: Record<string, string>): boolean {
    const expressions = (selector.matchExpressions ?? []) as { key: string; operator: string }[];
    return (
      selects(selector.matchLabels ?? {}, labels) &&
      expressions.every(({ key, operator }) => (operator === 'Exists') === key in labels)
    );
  }

  it("hands the control plane the chart's sandbox values as the configuration reads them", () => {
    const config = loadConfig(one(r(), 'ConfigMap').data);
    expect(config.sandboxes).toMatchObject({
      driver: 'kubernetes',
      kubernetesNamespace: SANDBOX_NS,
      image: `registry.example.com/acme/sandbox:${pkg.version}`,
      versionMismatch: 'warn',
      storage: { files: '20Gi', history: '3Gi', storageClassName: 'fast-ssd' },
    });
    // egress sandboxes reach the pool's private ranges
    expect(config.pool.egressAllowCidrs).toEqual(['10.30.0.0/16']);
    // without values the sandboxes stay local, and the default class is the cluster's
    expect(loadConfig(one(rendered['default (embedded)']!, 'ConfigMap').data).sandboxes.driver).toBe('local');
    expect(loadConfig(one(both(), 'ConfigMap').data).sandboxes).toMatchObject({
      kubernetesNamespace: SANDBOX_NS,
      storage: { files: '10Gi', history: '2Gi', storageClassName: undefined },
    });
  });

  it("makes the sandboxes' namespace enforce the restricted Pod Security Standard, and binds its Role to the control plane's ServiceAccount", () => {
    const namespace = one(r(), 'Namespace');
    expect(namespace.metadata.name).toBe(SANDBOX_NS);
    expect(namespace.metadata.labels['pod-security.kubernetes.io/enforce']).toBe('restricted');
    const role = one(r(), 'Role');
    const binding = one(r(), 'RoleBinding');
    expect([role.metadata.namespace, binding.metadata.namespace]).toEqual([SANDBOX_NS, SANDBOX_NS]);
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata.name });
    const deployment = controlPlane(r());
    expect(binding.subjects).toEqual([
      { kind: 'ServiceAccount', name: deployment.spec.template.spec.serviceAccountName, namespace: RELEASE_NS },
    ]);
    expect(deployment.spec.template.spec.automountServiceAccountToken).toBe(true);
    expect(one(r(), 'ServiceAccount').automountServiceAccountToken).toBe(true);
  });

  it("grants exactly the driver's calls: pods (create, get, list, watch, delete), claims (create, delete), Secrets (create, get, delete), NetworkPolicies (create, update, delete)", () => {
    expect([...grantsOf(one(r(), 'Role'))].sort()).toEqual(
      [
        '/pods:create',
        '/pods:get',
        '/pods:list',
        '/pods:watch',
        '/pods:delete',
        '/persistentvolumeclaims:create',
        '/persistentvolumeclaims:delete',
        '/secrets:create',
        '/secrets:get',
        '/secrets:delete',
        'networking.k8s.io/networkpolicies:create',
        'networking.k8s.io/networkpolicies:update',
        'networking.k8s.io/networkpolicies:delete',
      ].sort(),
    );
  });

  it("denies all traffic in the sandboxes' namespace but the control plane's to a sandbox's two runners", () => {
    const policies = find(r(), 'NetworkPolicy');
    expect(policies.every((p) => p.metadata.namespace === SANDBOX_NS)).toBe(true);
    const deny = policies.find((p) => Object.keys(p.spec.podSelector).length === 0);
    expect(deny?.spec).toEqual({ podSelector: {}, policyTypes: ['Ingress', 'Egress'] });
    const admit = policies.find((p) => p !== deny)!;
    expect(admit.spec.policyTypes).toEqual(['Ingress']);
    // the label the driver selects its pods by, not the pool's instances
    expect(selectsPod(admit.spec.podSelector, { [SANDBOX_SELECTOR]: 'x' })).toBe(true);
    expect(selectsPod(admit.spec.podSelector, MANAGED_BY)).toBe(false);
    const [rule] = admit.spec.ingress;
    expect(rule.from).toHaveLength(1);
    expect(rule.from[0].namespaceSelector.matchLabels).toEqual({ 'kubernetes.io/metadata.name': RELEASE_NS });
    expect(selects(rule.from[0].podSelector.matchLabels, controlPlane(r()).spec.template.metadata.labels)).toBe(true);
    expect(rule.ports).toEqual([
      { protocol: 'TCP', port: SANDBOX_RUNNER_PORTS.sandbox },
      { protocol: 'TCP', port: SANDBOX_RUNNER_PORTS.history },
    ]);
    expect(one(r(), 'ResourceQuota').spec.hard['requests.storage']).toBeDefined();
  });

  it("refuses the pool's namespace for sandboxes, where their Role would read every instance's credentials; with both on Kubernetes no Role reads a Secret of the pool", () => {
    const shared = {
      pool: { driver: 'kubernetes', namespace: POOL_NS },
      sandboxes: { driver: 'kubernetes', namespace: POOL_NS },
    };
    expect(renderError(shared, { namespace: RELEASE_NS })).toMatch(/sandboxes\.namespace must not be pool\.namespace/);
    // the control plane's own check, for installations without the chart
    expect(() =>
      loadConfig({
        AILERON_POOL_DRIVER: 'kubernetes',
        AILERON_SANDBOX_DRIVER: 'kubernetes',
        AILERON_K8S_NAMESPACE: POOL_NS,
        AILERON_SANDBOX_K8S_NAMESPACE: POOL_NS,
      }),
    ).toThrow(/AILERON_SANDBOX_K8S_NAMESPACE/);
    // a sandbox namespace of its own while the pool is local holds no instance's Secrets
    expect(
      renderError({ sandboxes: { driver: 'kubernetes', namespace: POOL_NS } }, { namespace: RELEASE_NS }),
    ).toBeUndefined();
    for (const set of SETS) {
      for (const role of find(rendered[set]!, 'Role').filter((role) => role.metadata.namespace === POOL_NS)) {
        const reads = [...grantsOf(role)].filter((grant) => /^\/secrets:(get|list|watch)$/.test(grant));
        expect(reads, `${set}: Role ${role.metadata.name}`).toEqual([]);
      }
    }
    expect(
      find(both(), 'Role')
        .map((role) => `${role.metadata.namespace}/${role.metadata.name}`)
        .sort(),
    ).toEqual([`${POOL_NS}/aileron-pool`, `${SANDBOX_NS}/aileron-sandbox`]);
  });

  it('refuses the release namespace as the sandboxes’ namespace, and tells in NOTES.txt where sandboxes run', () => {
    expect(
      renderError({ sandboxes: { driver: 'kubernetes', namespace: RELEASE_NS } }, { namespace: RELEASE_NS }),
    ).toMatch(/sandboxes\.namespace/);
    expect(notes(VALUE_SETS[set]!, { namespace: RELEASE_NS })).toContain(
      `Sandboxes run as pods in namespace ${SANDBOX_NS} (registry.example.com/acme/sandbox:${pkg.version})`,
    );
  });

  describe("the Role against the driver's calls", () => {
    let scratch: string;
    let fake: FakeKubernetes;
    let kubelet: ProcessKubelet;
    const lines: string[] = [];

    beforeAll(async () => {
      scratch = mkdtempSync(join(tmpdir(), 'helm-sandboxes-'));
      fake = await FakeKubernetes.start({ namespace: SANDBOX_NS });
      const image = sandboxImageMaker(scratch);
      kubelet = new ProcessKubelet(fake, {
        volumes: join(scratch, 'volumes'),
        images: { [`registry.example.com/acme/sandbox:${pkg.version}`]: image(SANDBOX_VERSION) },
        args: listenOnPodIP,
      });
    });
    afterAll(async () => {
      await kubelet?.close();
      await fake?.close();
      rmSync(scratch, { recursive: true, force: true });
    });

    it("allows every call the driver makes through a sandbox's life (made, started, stopped, reached by a restarted control plane, its network changed, removed), and nothing it does not make", async () => {
      const allowed = refuseOutside(fake, one(r(), 'Role'));
      // the driver as the control plane builds it from its environment in the chart's pod
      const ports = await runnerPorts();
      const options = {
        ...kubernetesSandboxOptions(loadConfig(controlPlaneEnv(set))),
        kubeConfig: fake.kubeConfig(),
        ports,
        startTimeoutMs: 20_000,
        retryIntervalMs: 40,
        log: (line: string) => lines.push(line),
      };
      const spec: SandboxSpec = {
        id: randomUUID(),
        organizationId: randomUUID(),
        workspaceId: randomUUID(),
        name: 'fix-the-bug',
        network: 'none',
        limits: {},
      };
      const stem = `sandbox-${spec.id}`;
      const first = new KubernetesSandboxDriver(options);
      await first.create(spec);
      for (const claim of [`${stem}-files`, `${stem}-history`])
        expect(fake.get('persistentvolumeclaims', claim).spec.storageClassName).toBe('fast-ssd');
      // the sandbox's own policy admits this release's control plane from its own namespace by itself, on both runners' ports
      const policy = fake.get('networkpolicies', stem);
      const me = { namespace: RELEASE_NS, labels: controlPlane(r()).spec.template.metadata.labels };
      for (const port of [ports.sandbox, ports.history]) expect(admits(policy, me, port), `port ${port}`).toBe(true);
      expect(
        admits(policy, { ...me, labels: { ...me.labels, 'app.kubernetes.io/name': 'aileron-worker' } }, ports.sandbox),
      ).toBe(false);
      expect(admits(policy, { ...me, namespace: 'elsewhere' }, ports.sandbox)).toBe(false);
      expect(fake.get('persistentvolumeclaims', `${stem}-files`).spec.resources.requests.storage).toBe('20Gi');
      const runner = await first.runner(spec);
      await runner.call({ op: 'write', path: 'app.ts', content: 'export const answer = 42;\n' });
      expect(
        await takeSnapshot(first, spec, {
          author: { name: 'Agent', email: 'agent@aileron.invalid' },
          message: 'write: app.ts',
          at: new Date(),
          limits: { maxFiles: 100, maxBytes: 1024 * 1024 },
        }),
      ).not.toBeNull();
      await first.stop(spec);
      await first.runner(spec);
      // a restarted control plane reaches the running pod with the Secret's tokens, and a changed network applies at the next start
      await first.close();
      const restarted = new KubernetesSandboxDriver(options);
      expect((await (await restarted.runner(spec)).call({ op: 'readText', path: 'app.ts' })).content).toBe(
        'export const answer = 42;\n',
      );
      await restarted.stop(spec);
      await restarted.runner({ ...spec, network: 'egress' });
      expect(JSON.stringify(fake.get('networkpolicies', stem).spec.egress)).toContain('10.30.0.0/16');
      expect(ipv6Except(fake.get('networkpolicies', stem))).toContain('2001:db8:43::/56');
      expect((await restarted.git(spec, ['log', '--format=%s', SNAPSHOT_BRANCH])).stdout.toString()).toBe(
        'write: app.ts\n',
      );
      await restarted.remove(spec);
      await restarted.close();
      expect([
        ...fake.names('pods'),
        ...fake.names('persistentvolumeclaims'),
        ...fake.names('secrets'),
        ...fake.names('networkpolicies'),
      ]).toEqual([]);
      expect(lines.join('\n')).not.toMatch(/forbidden|answered 403/i);

      expect([...callsMade(fake)].sort()).toEqual([...allowed].sort());
    }, 120_000);
  });
});

describe("the README's Helm section", () => {
  /** `--set a.b[0].c=v` flags as Helm reads them (true, false and integers typed), into a values object. */
  function setFlags(line: string): Record<string, unknown> {
    const values: Record<string, unknown> = {};
    for (const [, path, raw] of line.matchAll(/--set (\S+?)=(\$\([^)]*\)|\S+)/g)) {
      const value =
        raw === 'true'
          ? true
          : raw === 'false'
            ? false
            : /^\d+$/.test(raw!)
              ? Number(raw)
              : raw!.replace(/^\$\(openssl rand -base64 32\)$/, ROOT_KEY);
      const keys = path!.split('.').flatMap((key) =>
        key
          .split(/\[(\d+)\]/)
          .filter(Boolean)
          .map((k) => (/^\d+$/.test(k) ? Number(k) : k)),
      );
      let at: any = values;
      keys.forEach((key, i) => {
        if (i === keys.length - 1) at[key] = value;
        else at = at[key] ??= typeof keys[i + 1] === 'number' ? [] : {};
      });
    }
    return values;
  }

  it('installs with values the schema accepts, and its token commands are the ones NOTES.txt gives', () => {
    const lines = shellLines(readmeSection('Install with Helm'));
    const installs = lines
      .join(' ')
      .replace(/\\ /g, ' ')
      .split(/(?=helm install )/)
      .filter((part) => part.startsWith('helm install '));
    expect(installs).toHaveLength(2);
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile(schema);
    for (const install of installs) {
      const [, release, chart, namespace] = /^helm install (\S+) (\S+) -n (\S+) --create-namespace/.exec(install)!;
      expect(join(ROOT, chart!)).toBe(CHART);
      const values = setFlags(install);
      expect(validate(mergedValues(values)), `${install}: ${ajv.errorsText(validate.errors)}`).toBe(true);
      const objects = render(values, { name: release!, namespace: namespace! });
      for (const kind of ['Deployment', 'Service', 'ConfigMap']) expect(find(objects, kind).length).toBeGreaterThan(0);
      const text = notes(values, { name: release!, namespace: namespace! });
      const token = lines.find(
        (line) =>
          line.includes('kubectl') &&
          (values.mode === 'server' ? line.includes('bootstrap') : line.includes('admin-token')),
      )!;
      expect(text).toContain(token.replace(/^TOKEN=\$\((.*)\)$/, '$1'));
    }
  });
});
