import { createReadStream } from 'node:fs';
import { type GitResult, type SandboxDriver, SandboxSourceError, type SandboxSpec } from './drivers/driver';
import { SNAPSHOT_BRANCH } from './drivers/local-sandbox-driver';

export const SNAPSHOT_REF = `refs/heads/${SNAPSHOT_BRANCH}`;

/**
 * An uploaded source into a sandbox nothing has been written to, the same
 * way on every driver. Its files reach /src only through the driver's
 * `unpack`, inside the sandbox, so no path or link of theirs lands outside
 * it; the history's git never writes /src (read-only for it on Kubernetes)
 * and the sandbox never sees the history.
 *
 * - a tar.gz is unpacked;
 * - a git bundle is lent to the history's git, which fetches it (its
 *   branches kept as `refs/source/*`); the work tree of its HEAD (else
 *   `main`, else its first branch) is archived there and unpacked in the
 *   sandbox; then that commit becomes the base of the snapshot branch, so
 *   the next change is a commit on top of it.
 *
 * A bundle git cannot read, or whose HEAD is no commit, is a
 * SandboxSourceError before anything of the sandbox changed (only fetched
 * objects that nothing names may stay).
 */
export async function importSource(
  driver: SandboxDriver,
  spec: SandboxSpec,
  type: 'git-bundle' | 'tar.gz',
  file: string,
): Promise<void> {
  if (type === 'tar.gz') return driver.unpack(spec, createReadStream(file), { gzip: true });
  const head = await driver.withFileForGit(spec, file, async (path) => {
    const listed = await driver.git(spec, ['bundle', 'list-heads', path]);
    if (listed.code !== 0) throw invalid('not a git bundle', listed);
    const heads = listed.stdout
      .toString()
      .trim()
      .split('\n')
      .map((line) => line.split(' ') as [string, string]);
    const chosen =
      heads.find(([, ref]) => ref === 'HEAD') ??
      heads.find(([, ref]) => ref === 'refs/heads/main') ??
      heads.find(([, ref]) => ref?.startsWith('refs/heads/'));
    if (!chosen) throw new SandboxSourceError('the bundle has no branch and no HEAD');
    const fetched = await driver.git(spec, [
      '-c',
      'protocol.file.allow=always',
      'fetch',
      '--quiet',
      '--no-tags',
      path,
      '+refs/heads/*:refs/source/heads/*',
      ...(chosen[1] === 'HEAD' ? ['+HEAD:refs/source/HEAD'] : []),
    ]);
    if (fetched.code !== 0) throw invalid('the bundle could not be read', fetched);
    return { sha: chosen[0], ref: chosen[1] };
  });
  const commit = await driver.git(spec, ['rev-parse', '--verify', '--quiet', `${head.sha}^{commit}`]);
  if (commit.code !== 0) throw new SandboxSourceError(`the bundle's ${head.ref} is not a commit`);
  const sha = commit.stdout.toString().trim();
  await driver.unpack(spec, driver.gitStream(spec, ['archive', '--format=tar', sha]), { gzip: false });
  // the branch last: a tree that did not unpack leaves no snapshot behind
  const done = await driver.git(spec, ['update-ref', SNAPSHOT_REF, sha]);
  if (done.code !== 0) throw new Error(`git update-ref failed: ${done.stderr.trim()}`);
}

function invalid(what: string, result: GitResult): SandboxSourceError {
  return new SandboxSourceError(`${what}: ${result.stderr.trim().split('\n')[0] ?? ''}`);
}
