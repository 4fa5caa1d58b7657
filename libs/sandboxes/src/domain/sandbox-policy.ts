import { isAbsolute, posix } from 'node:path';
import { z } from 'zod';
import { type ExecRestrictions, SANDBOX_TMPDIR, SANDBOX_WORKDIR } from '../runner-protocol';

/** The experimental capability a server declares when it takes a client's sandbox policy (the shell-tool README). */
export const SANDBOX_STATE_CAPABILITY = 'codex/sandbox-state';
/** The request that carries the policy: answered `{}` once applied. */
export const SANDBOX_STATE_METHOD = 'codex/sandbox-state/update';

/**
 * Codex's `SandboxPolicy` (codex-rs/protocol/src/protocol.rs), as a client
 * sends it in `codex/sandbox-state/update`: tagged by `type`, snake_case
 * fields, each optional with Codex's defaults. Fields a newer Codex adds are
 * let through and not read.
 */
export const SandboxPolicySchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('danger-full-access') }).passthrough(),
  z.object({ type: z.literal('read-only'), network_access: z.boolean().optional() }).passthrough(),
  z
    .object({ type: z.literal('external-sandbox'), network_access: z.enum(['restricted', 'enabled']).optional() })
    .passthrough(),
  z
    .object({
      type: z.literal('workspace-write'),
      writable_roots: z.array(z.string().min(1).max(4096)).max(256).optional(),
      network_access: z.boolean().optional(),
      exclude_tmpdir_env_var: z.boolean().optional(),
      exclude_slash_tmp: z.boolean().optional(),
    })
    .passthrough(),
]);

export type SandboxPolicy = z.infer<typeof SandboxPolicySchema>;

/** The update's params: the policy, and the client's working directory (Codex's `sandboxCwd`), which stands for /src. */
export const SandboxStateSchema = z
  .object({
    sandboxPolicy: SandboxPolicySchema,
    sandboxCwd: z.string().max(4096).optional(),
  })
  .passthrough();

export type SandboxState = z.infer<typeof SandboxStateSchema>;

/** A writable root the policy named that the sandbox does not take, and why: the update only narrows. */
export interface IgnoredRoot {
  path: string;
  reason: string;
}

export interface CommandBounds {
  /** null: the sandbox's own bounds (danger-full-access) */
  restrictions: ExecRestrictions | null;
  ignored: IgnoredRoot[];
}

/** Where a sandbox may write at all: a writable root elsewhere would widen it, so it is never taken. */
const SANDBOX_WRITABLE = [SANDBOX_WORKDIR, '/tmp'];

function within(path: string, root: string): boolean {
  return path === root || path.startsWith(root === '/' ? '/' : `${root}/`);
}

/**
 * A path of the client's as a path of this sandbox: the client's working
 * directory is the sandbox's /src (the agent works on the same files), and a
 * path already under /src or /tmp is the sandbox's own. Anything else names
 * the client's machine, or a place of the sandbox it may not write: null.
 * `..` is resolved by name first, so `/src/../etc` is /etc.
 */
function inSandbox(path: string, clientCwd: string | null): string | null {
  const normal = posix.normalize(path).replace(/(.)\/+$/, '$1');
  if (SANDBOX_WRITABLE.some((root) => within(normal, root))) return normal;
  if (clientCwd && within(normal, clientCwd))
    return posix.join(SANDBOX_WORKDIR, posix.relative(clientCwd, normal)).replace(/(.)\/+$/, '$1');
  return null;
}

/**
 * What a client's sandbox policy asks of the `bash` commands of its MCP
 * session, in this sandbox's terms, as Codex reads the policy
 * (`get_writable_roots_with_cwd`), and never more than the sandbox allows:
 *
 * - `danger-full-access`: the sandbox's own bounds (null);
 * - `external-sandbox`: no network unless `network_access: "enabled"`;
 * - `read-only`: nothing writable; no network unless `network_access`;
 * - `workspace-write`: writable are the working directory (/src), the
 *   `writable_roots` that lie in what the sandbox may write (/src, /tmp, or
 *   the client's working directory, which is /src), /tmp unless
 *   `exclude_slash_tmp`, and the command's TMPDIR unless
 *   `exclude_tmpdir_env_var`; everything else is read-only (the home
 *   directory included); no network unless `network_access`.
 *
 * A root elsewhere (`/`, `/etc`, `/src/../etc`, a path of the client's
 * machine outside its working directory, a relative path) is ignored and
 * listed. The runner checks each root again inside the sandbox, where a
 * symbolic link resolves (the agent may have made one): a root that is or
 * passes through one, or does not exist, is ignored there too.
 */
export function commandBounds(state: SandboxState): CommandBounds {
  const policy = state.sandboxPolicy;
  switch (policy.type) {
    case 'danger-full-access':
      return { restrictions: null, ignored: [] };
    case 'external-sandbox':
      return { restrictions: { network: policy.network_access === 'enabled' }, ignored: [] };
    case 'read-only':
      return { restrictions: { writable: [], network: policy.network_access === true }, ignored: [] };
    case 'workspace-write': {
      const clientCwd =
        state.sandboxCwd && isAbsolute(state.sandboxCwd)
          ? posix.normalize(state.sandboxCwd).replace(/(.)\/+$/, '$1')
          : null;
      const cwd = (clientCwd && inSandbox(clientCwd, null)) ?? SANDBOX_WORKDIR;
      const writable = [cwd];
      const ignored: IgnoredRoot[] = [];
      for (const root of policy.writable_roots ?? []) {
        const mapped = isAbsolute(root) ? inSandbox(root, clientCwd) : null;
        if (mapped === null)
          ignored.push({
            path: root,
            reason: isAbsolute(root)
              ? `outside what the sandbox may write (${SANDBOX_WRITABLE.join(', ')}, or the client's working directory, which is ${SANDBOX_WORKDIR})`
              : 'not an absolute path',
          });
        else writable.push(mapped);
      }
      // TMPDIR apart from /tmp, so that each flag decides one of them, as where Codex runs TMPDIR is not /tmp
      const tmpdir = policy.exclude_slash_tmp && !policy.exclude_tmpdir_env_var ? SANDBOX_TMPDIR : '/tmp';
      if (!policy.exclude_slash_tmp) writable.push('/tmp');
      if (!policy.exclude_tmpdir_env_var) writable.push(tmpdir);
      return {
        restrictions: { writable: [...new Set(writable)], network: policy.network_access === true, tmpdir },
        ignored,
      };
    }
  }
}
