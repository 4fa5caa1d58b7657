import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config';
import { describeSettings } from './config.schema';

describe('loadConfig', () => {
  it('with nothing set is the embedded mode on 8080, loopback only, data in ./.aileron', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      mode: 'embedded',
      port: 8080,
      host: '127.0.0.1',
      runWorkers: true,
      database: { kind: 'pglite' },
    });
    expect(config.dataDir).toBe(join(process.cwd(), '.aileron'));
    expect(config.publicUrl).toBe('http://localhost:8080');
  });

  it('DATABASE_URL and REDIS_URL select the server mode, with workers in their own process', () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://u:p@db:5432/aileron', REDIS_URL: 'redis://redis:6379' });
    expect(config).toMatchObject({
      mode: 'server',
      host: '0.0.0.0',
      runWorkers: false,
      database: { kind: 'postgres', poolSize: 10 },
    });
  });

  it('names every bad variable, and never echoes a URL that may hold a password', () => {
    try {
      loadConfig({ PORT: '0', DATABASE_URL: 'mysql://root:hunter2@x/y', AILERON_RUN_WORKERS: 'maybe' });
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      const message = (error as Error).message;
      expect(message).toContain('PORT must be 1..65535');
      expect(message).toContain('DATABASE_URL must be a postgres://');
      expect(message).toContain('AILERON_RUN_WORKERS must be true or false');
      expect(message).not.toContain('hunter2');
    }
  });

  it('the control plane’s own Pod (downward API) reaches the Kubernetes pool; a UID without the name is refused', () => {
    const uid = '0b6c3f0e-8a43-4d8e-9a55-0a4d2f1c7e21';
    expect(loadConfig({ AILERON_POD_NAME: 'aileron-7d9f-x2k4', AILERON_POD_UID: uid }).pool.controlPlanePod).toEqual({
      name: 'aileron-7d9f-x2k4',
      uid,
    });
    expect(loadConfig({}).pool.controlPlanePod).toBeUndefined();
    expect(() => loadConfig({ AILERON_POD_UID: uid })).toThrow(/AILERON_POD_UID needs AILERON_POD_NAME/);
  });

  it('AILERON_SANDBOX_CPUS: one CPU per sandbox unless set, a fraction or several, 0 or max for no bound, anything else refused by name', () => {
    expect(loadConfig({}).sandboxes.cpus).toBe(1);
    expect(loadConfig({ AILERON_SANDBOX_CPUS: '0.5' }).sandboxes.cpus).toBe(0.5);
    expect(loadConfig({ AILERON_SANDBOX_CPUS: '2' }).sandboxes.cpus).toBe(2);
    expect(loadConfig({ AILERON_SANDBOX_CPUS: '0' }).sandboxes.cpus).toBeUndefined();
    expect(loadConfig({ AILERON_SANDBOX_CPUS: 'max' }).sandboxes.cpus).toBeUndefined();
    for (const bad of ['-1', 'half', '0.001', '1e3']) {
      expect(() => loadConfig({ AILERON_SANDBOX_CPUS: bad }), bad).toThrow(
        /AILERON_SANDBOX_CPUS must be a number of CPUs such as 1 or 0.5 \(at least 0.01\), or 0 or max for no bound/,
      );
    }
  });

  it("refuses sandboxes in the pool's namespace when both run on Kubernetes: the sandboxes' Secrets access would reach the pool's", () => {
    const both = { AILERON_POOL_DRIVER: 'kubernetes', AILERON_SANDBOX_DRIVER: 'kubernetes' };
    expect(() => loadConfig(both)).toThrow(
      /AILERON_SANDBOX_K8S_NAMESPACE must name a namespace other than the pool's \(AILERON_K8S_NAMESPACE, aileron-pool\)/,
    );
    expect(() =>
      loadConfig({ ...both, AILERON_K8S_NAMESPACE: 'tenants', AILERON_SANDBOX_K8S_NAMESPACE: 'tenants' }),
    ).toThrow(/AILERON_SANDBOX_K8S_NAMESPACE/);
    expect(
      loadConfig({ ...both, AILERON_SANDBOX_K8S_NAMESPACE: 'aileron-sandboxes' }).sandboxes.kubernetesNamespace,
    ).toBe('aileron-sandboxes');
    // with the pool local there are no pool Secrets to reach
    expect(loadConfig({ AILERON_SANDBOX_DRIVER: 'kubernetes' }).sandboxes.kubernetesNamespace).toBe('aileron-pool');
  });

  it("gives local pool instances a uid range of their own, and refuses one that overlaps the sandboxes' or ends past the last uid", () => {
    expect(loadConfig({}).pool.uidBase).toBe(1_879_113_728);
    expect(loadConfig({}).sandboxes.uidBase + 65_536).toBeLessThanOrEqual(loadConfig({}).pool.uidBase);
    expect(loadConfig({ AILERON_POOL_UID_BASE: '200000' }).pool.uidBase).toBe(200_000);
    expect(() => loadConfig({ AILERON_POOL_UID_BASE: '1879048193' })).toThrow(
      /AILERON_POOL_UID_BASE must be 65536 or more away from AILERON_SANDBOX_UID_BASE \(1879048192\)/,
    );
    expect(() => loadConfig({ AILERON_SANDBOX_UID_BASE: '1879113727' })).toThrow(
      /AILERON_POOL_UID_BASE must be 65536 or more away/,
    );
    expect(() => loadConfig({ AILERON_POOL_UID_BASE: '4294967000' })).toThrow(
      /AILERON_POOL_UID_BASE must be at most 4294901759/,
    );
  });

  it('takes more ranges to keep Kubernetes pods from (a cluster’s global IPv6 ranges), and refuses one that is not a strict subrange', () => {
    expect(
      loadConfig({ AILERON_POOL_EGRESS_EXCEPT_CIDRS: '2001:db8:42::/56, 203.0.113.0/24' }).pool.egressExceptCidrs,
    ).toEqual(['2001:db8:42::/56', '203.0.113.0/24']);
    expect(loadConfig({}).pool.egressExceptCidrs).toEqual([]);
    expect(() => loadConfig({ AILERON_POOL_EGRESS_EXCEPT_CIDRS: '2001:db8::/129' })).toThrow(
      /AILERON_POOL_EGRESS_EXCEPT_CIDRS must be a comma-separated list of CIDR ranges/,
    );
    expect(() => loadConfig({ AILERON_POOL_EGRESS_EXCEPT_CIDRS: '::/0' })).toThrow(
      /AILERON_POOL_EGRESS_EXCEPT_CIDRS must name ranges narrower than \/0/,
    );
  });

  it('the control plane’s own namespace (downward API) reaches both Kubernetes drivers, for their NetworkPolicies', () => {
    expect(loadConfig({ AILERON_POD_NAMESPACE: 'aileron' }).pool.controlPlaneNamespace).toBe('aileron');
    expect(loadConfig({}).pool.controlPlaneNamespace).toBeUndefined();
    expect(() => loadConfig({ AILERON_POD_NAMESPACE: 'Not_A_Namespace' })).toThrow(
      /AILERON_POD_NAMESPACE must be a Kubernetes namespace name/,
    );
  });

  it('reads an optional YAML or JSON file, and the environment wins over it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-'));
    const file = join(dir, 'aileron.yaml');
    writeFileSync(file, 'PORT: 9000\nLOG_LEVEL: debug\nUPSTREAM_ALLOW_CIDRS: [10.0.0.0/8, "fd00::/8"]\n');
    const config = loadConfig({ AILERON_CONFIG_FILE: file, LOG_LEVEL: 'warn' });
    expect(config).toMatchObject({ port: 9000, logLevel: 'warn', upstreamAllowCidrs: ['10.0.0.0/8', 'fd00::/8'] });
    writeFileSync(join(dir, 'bad.json'), '{"NOT_A_SETTING": 1}');
    expect(() => loadConfig({ AILERON_CONFIG_FILE: join(dir, 'bad.json') })).toThrow(
      /AILERON_CONFIG_FILE names an unknown setting "NOT_A_SETTING"/,
    );
    expect(() => loadConfig({ AILERON_CONFIG_FILE: join(dir, 'missing.json') })).toThrow(
      /AILERON_CONFIG_FILE cannot be read: ENOENT/,
    );
  });
});

describe('README', () => {
  it('documents every setting with its default', () => {
    const readme = readFileSync(join(__dirname, '../../../../README.md'), 'utf8');
    for (const setting of describeSettings()) {
      const row = readme.split('\n').find((line) => line.startsWith(`| \`${setting.name}\` |`));
      expect(row, setting.name).toBeDefined();
      if (setting.default) expect(row, setting.name).toContain(`\`${setting.default}\``);
    }
  });
});
