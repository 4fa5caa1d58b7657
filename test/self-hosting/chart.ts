import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { ROOT } from './readme';

/**
 * The Helm chart, rendered by scripts/helm-render (Go's text/template with
 * sprig, the engine Helm itself runs) and read back as Kubernetes objects.
 */

export const CHART = join(ROOT, 'helm', 'aileron');
const RENDERER = join(ROOT, '.tmp', 'helm-render', 'helm-render');

/** Kubernetes objects are free-form JSON to the tests. */
export type K8sObject = any;

export interface Rendered {
  objects: K8sObject[];
  /** the template each object came from, by index */
  sources: string[];
}

export interface RenderOptions {
  namespace?: string;
  name?: string;
  apiVersions?: string[];
}

let built = false;

/** Builds the renderer (offline, from Debian's Go packages) once per run; the script skips an up-to-date binary. */
export function ensureRenderer(): void {
  if (built) return;
  execFileSync('sh', [join(ROOT, 'scripts', 'helm-render', 'build.sh')], { encoding: 'utf8', stdio: 'pipe' });
  built = true;
}

function run(
  values: object,
  options: RenderOptions,
  extra: string[],
): { status: number | null; stdout: string; stderr: string } {
  ensureRenderer();
  const dir = mkdtempSync(join(tmpdir(), 'aileron-helm-'));
  try {
    const file = join(dir, 'values.json');
    writeFileSync(file, JSON.stringify(values));
    const args = [
      '-f',
      file,
      '-namespace',
      options.namespace ?? 'aileron',
      '-name',
      options.name ?? 'aileron',
      ...extra,
    ];
    if (options.apiVersions?.length) args.push('-api-versions', options.apiVersions.join(','));
    const result = spawnSync(RENDERER, [...args, CHART], { encoding: 'utf8' });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function render(values: object = {}, options: RenderOptions = {}): Rendered {
  const result = run(values, options, []);
  if (result.status !== 0) throw new Error(`helm-render failed: ${result.stderr}`);
  const objects: K8sObject[] = [];
  const sources: string[] = [];
  // YAML 1.1, as the API server's decoder reads manifests (an unquoted `yes` is a boolean there)
  for (const document of parseAllDocuments(result.stdout, { version: '1.1' })) {
    if (document.errors.length > 0) throw new Error(`rendered YAML does not parse: ${document.errors[0]!.message}`);
    const object: unknown = document.toJS();
    if (object === null) continue;
    objects.push(object);
    sources.push(
      /# Source: (\S+)/.exec(`${document.commentBefore ?? ''}\n${document.contents?.commentBefore ?? ''}`)?.[1] ?? '',
    );
  }
  return { objects, sources };
}

/** The error a values set makes the chart fail with (undefined: it renders). */
export function renderError(values: object, options: RenderOptions = {}): string | undefined {
  const result = run(values, options, []);
  return result.status === 0 ? undefined : result.stderr;
}

export function notes(values: object = {}, options: RenderOptions = {}): string {
  const result = run(values, options, ['-notes']);
  if (result.status !== 0) throw new Error(`helm-render failed: ${result.stderr}`);
  return result.stdout;
}

export function find(rendered: Rendered, kind: string, name?: string): K8sObject[] {
  return rendered.objects.filter((o) => o.kind === kind && (name === undefined || o.metadata?.name === name));
}

export function one(rendered: Rendered, kind: string, name?: string): K8sObject {
  const found = find(rendered, kind, name);
  if (found.length !== 1) throw new Error(`expected one ${kind}${name ? ` ${name}` : ''}, rendered ${found.length}`);
  return found[0];
}

/** values.yaml, with a values set laid over it as Helm merges them (maps by key, null removes). */
export function mergedValues(values: object): Record<string, unknown> {
  const defaults = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;
  return coalesce(values as Record<string, unknown>, defaults);
}

function coalesce(override: Record<string, unknown>, base: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(override)) {
    if (value === null) delete out[key];
    else if (isMap(value) && isMap(out[key])) out[key] = coalesce(value, out[key]);
    else out[key] = value;
  }
  return out;
}

function isMap(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Every pod template the chart renders (Deployments and Jobs), with where it came from. */
export function podTemplates(rendered: Rendered): { owner: string; spec: K8sObject; metadata: K8sObject }[] {
  return rendered.objects
    .filter((o) => o.kind === 'Deployment' || o.kind === 'Job')
    .map((o) => ({
      owner: `${o.kind}/${o.metadata.name}`,
      spec: o.spec.template.spec,
      metadata: o.spec.template.metadata,
    }));
}
