/**
 * A sandbox's name as every API and tool sees it: lower case, `[a-z0-9-]`,
 * each run of anything else one `-`, trimmed of `-`, at most 63 characters (a
 * DNS label, so a Kubernetes driver can name objects after it). The same rule
 * resolves the `sandbox` argument of every tool, so `My Sandbox` and
 * `my-sandbox` are one sandbox.
 */
export function sandboxSlug(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/, '');
}
