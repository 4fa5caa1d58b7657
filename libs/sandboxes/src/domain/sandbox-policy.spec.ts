import { describe, expect, it } from 'vitest';
import { commandBounds, type SandboxState, SandboxStateSchema } from './sandbox-policy';

function bounds(sandboxPolicy: Record<string, unknown>, sandboxCwd?: string) {
  return commandBounds(SandboxStateSchema.parse({ sandboxPolicy, ...(sandboxCwd ? { sandboxCwd } : {}) }));
}

const write = (extra: Record<string, unknown> = {}) => ({ type: 'workspace-write', ...extra });

describe("a client's sandbox policy in the sandbox's terms", () => {
  it('danger-full-access leaves the sandbox its own bounds; external-sandbox only takes the network unless enabled', () => {
    expect(bounds({ type: 'danger-full-access' })).toEqual({ restrictions: null, ignored: [] });
    expect(bounds({ type: 'external-sandbox' }).restrictions).toEqual({ network: false });
    expect(bounds({ type: 'external-sandbox', network_access: 'enabled' }).restrictions).toEqual({ network: true });
  });

  it('read-only: nothing writable, no network unless asked', () => {
    expect(bounds({ type: 'read-only' }).restrictions).toEqual({ writable: [], network: false });
    expect(bounds({ type: 'read-only', network_access: true }).restrictions).toEqual({ writable: [], network: true });
  });

  it("workspace-write, Codex's defaults: the workspace, /tmp and TMPDIR (which is /tmp) writable, no network", () => {
    expect(bounds(write()).restrictions).toEqual({ writable: ['/src', '/tmp'], network: false, tmpdir: '/tmp' });
    expect(bounds(write({ network_access: true })).restrictions?.network).toBe(true);
  });

  it('exclude_slash_tmp and exclude_tmpdir_env_var each take one place away: TMPDIR moves out of /tmp when only /tmp goes', () => {
    expect(bounds(write({ exclude_slash_tmp: true })).restrictions).toMatchObject({
      writable: ['/src', '/tmp/tmpdir'],
      tmpdir: '/tmp/tmpdir',
    });
    expect(bounds(write({ exclude_tmpdir_env_var: true })).restrictions).toMatchObject({
      writable: ['/src', '/tmp'],
      tmpdir: '/tmp',
    });
    expect(bounds(write({ exclude_slash_tmp: true, exclude_tmpdir_env_var: true })).restrictions).toMatchObject({
      writable: ['/src'],
      tmpdir: '/tmp',
    });
  });

  it("the client's working directory is /src: roots under it land under /src, and a cwd in the sandbox is its own", () => {
    const onLaptop = bounds(write({ writable_roots: ['/home/ana/code/app/build', '/src/out/'] }), '/home/ana/code/app');
    expect(onLaptop.restrictions?.writable).toEqual(['/src', '/src/build', '/src/out', '/tmp']);
    expect(onLaptop.ignored).toEqual([]);
    const inside = bounds(
      write({ writable_roots: ['/src/lib'], exclude_slash_tmp: true, exclude_tmpdir_env_var: true }),
      '/src/app',
    );
    expect(inside.restrictions?.writable).toEqual(['/src/app', '/src/lib']);
  });

  it('a root outside what the sandbox may write never widens anything: ignored, and said why', () => {
    const hostile = bounds(
      write({
        writable_roots: ['/', '/etc', '/src/../etc', '/home/ana/other', 'relative/dir', '/srcfoo', '/proc/self/root'],
        exclude_slash_tmp: true,
        exclude_tmpdir_env_var: true,
      }),
      '/home/ana/code/app',
    );
    expect(hostile.restrictions?.writable).toEqual(['/src']);
    expect(hostile.ignored.map((i) => [i.path, i.reason.split(' (')[0]])).toEqual([
      ['/', 'outside what the sandbox may write'],
      ['/etc', 'outside what the sandbox may write'],
      ['/src/../etc', 'outside what the sandbox may write'],
      ['/home/ana/other', 'outside what the sandbox may write'],
      ['relative/dir', 'not an absolute path'],
      ['/srcfoo', 'outside what the sandbox may write'],
      ['/proc/self/root', 'outside what the sandbox may write'],
    ]);
    // a cwd that climbs out by `..` is not the client's: the workspace is /src
    expect(bounds(write({ writable_roots: ['/src/../src/a'] }), '/src/../etc').restrictions?.writable).toEqual([
      '/src',
      '/src/a',
      '/tmp',
    ]);
  });

  it('refuses what is not a policy Codex sends: an unknown type, roots that are not strings', () => {
    for (const sandboxPolicy of [
      { type: 'full-trust' },
      write({ writable_roots: '/src' }),
      write({ writable_roots: [1] }),
      {},
    ]) {
      expect(SandboxStateSchema.safeParse({ sandboxPolicy }).success, JSON.stringify(sandboxPolicy)).toBe(false);
    }
    expect(SandboxStateSchema.safeParse({}).success).toBe(false);
    // fields a newer Codex adds are let through
    const newer: SandboxState = SandboxStateSchema.parse({
      sandboxPolicy: write({ read_only_access: { type: 'full-access' } }),
      codexLinuxSandboxExe: null,
      useLegacyLandlock: false,
    });
    expect(commandBounds(newer).restrictions?.writable).toEqual(['/src', '/tmp']);
  });
});
