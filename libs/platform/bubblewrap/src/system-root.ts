import { lstatSync, readlinkSync } from 'node:fs';

/**
 * bubblewrap arguments for the read-only system root a sandbox sees: /usr,
 * the top-level directories (or the symlinks a merged /usr makes of them),
 * and the few files of /etc programs need to run, resolve names and trust
 * certificates. Nothing else of the host: not its home directories, not the
 * control plane's data directory, not the rest of /etc.
 */
export function systemRootArgs(etc: readonly string[] = ['/etc/ssl', '/etc/resolv.conf', '/etc/hosts']): string[] {
  const args = ['--ro-bind', '/usr', '/usr'];
  for (const top of ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']) {
    const stat = lstatSync(top, { throwIfNoEntry: false });
    if (stat?.isSymbolicLink()) args.push('--symlink', readlinkSync(top), top);
    else if (stat?.isDirectory()) args.push('--ro-bind', top, top);
  }
  for (const path of etc) args.push('--ro-bind-try', path, path);
  return args;
}
