import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { installDir, npxPackage, packageLaunch, type PackageLaunchOptions } from './package-launch';

const scratch = mkdtempSync(join(tmpdir(), 'package-launch-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A package tarball with the given bins (each a file of its own), as npm packs one. */
function tarball(name: string, bins: Record<string, string>): string {
  const dir = join(scratch, randomBytes(4).toString('hex'));
  mkdirSync(join(dir, 'package'), { recursive: true });
  writeFileSync(join(dir, 'package', 'package.json'), JSON.stringify({ name, version: '1.0.0', bin: bins }));
  for (const [bin, file] of Object.entries(bins))
    writeFileSync(
      join(dir, 'package', file),
      file.endsWith('.sh') ? '#!/bin/sh\n' : `#!/usr/bin/env node\n// ${bin}\n`,
    );
  const file = join(dir, `${name.replace(/[@/]/g, '-')}.tgz`);
  execFileSync('tar', ['-czf', file, '-C', dir, 'package']);
  return file;
}

function options(log: string[] = []): PackageLaunchOptions {
  const home = join(scratch, `home-${randomBytes(4).toString('hex')}`);
  mkdirSync(home);
  return {
    cacheDir: join(home, '.cache', 'aileron', 'packages'),
    // npm's own cache in the home too: nothing of the host's is read or written
    env: { PATH: process.env.PATH, HOME: home, npm_config_cache: join(home, '.npm') },
    nodeBinary: '/usr/bin/node',
    log: (line) => log.push(line),
  };
}

describe('npxPackage', () => {
  it('takes a plain npx of a package, with or without -y, and leaves every other command as written', () => {
    expect(npxPackage('npx', ['-y', '@acme/github-mcp@1.4.0', '--read-only'])).toEqual({
      spec: '@acme/github-mcp@1.4.0',
      rest: ['--read-only'],
    });
    expect(npxPackage('/usr/local/bin/npx', ['--yes', 'server-memory'])).toEqual({ spec: 'server-memory', rest: [] });
    expect(npxPackage('npx', ['server-memory', '-y'])).toEqual({ spec: 'server-memory', rest: ['-y'] });
    for (const [command, args] of [
      ['npx', ['-p', 'a', 'b']],
      ['npx', ['--package=a', 'b']],
      ['npx', ['-c', 'echo hi']],
      ['npx', ['--no-install', 'a']],
      ['npx', ['./server']],
      ['npx', ['-y']],
      ['node', ['server.js']],
      ['npm', ['exec', 'a']],
    ] as const)
      expect(npxPackage(command, [...args])).toBeUndefined();
  });
});

describe('packageLaunch', () => {
  it("installs the package and runs its program with node, the one of the package's name among several", async () => {
    const log: string[] = [];
    const spec = tarball('@acme/echo-mcp', { 'echo-mcp': 'main.js', 'echo-admin': 'admin.js' });
    const launch = await packageLaunch('npx', ['-y', spec, '--verbose'], options(log));
    expect(launch).toEqual({
      command: '/usr/bin/node',
      args: [expect.stringMatching(/\/node_modules\/@acme\/echo-mcp\/main\.js$/), '--verbose'],
    });
    expect(log).toEqual([expect.stringMatching(/: runs \S+main\.js \(installed in \d+ ms\)$/)]);
  });

  it('runs a program that is not JavaScript itself', async () => {
    const spec = tarball('shell-mcp', { 'shell-mcp': 'serve.sh' });
    const launch = await packageLaunch('npx', ['-y', spec], options());
    expect(launch).toEqual({ command: expect.stringMatching(/\/node_modules\/shell-mcp\/serve\.sh$/), args: [] });
  });

  it('uses the copy installed before when npm fails, and npx as written when there is none', async () => {
    const spec = tarball('flaky-mcp', { 'flaky-mcp': 'index.js' });
    const given = options();
    const first = await packageLaunch('npx', ['-y', spec], given);
    rmSync(spec); // the package can no longer be fetched

    const log: string[] = [];
    expect(await packageLaunch('npx', ['-y', spec], { ...given, log: (line) => log.push(line) })).toEqual(first);
    expect(log.at(-1)).toMatch(/npm install failed \(exit code \d+\); runs the copy installed before/);

    const fresh: string[] = [];
    expect(await packageLaunch('npx', ['-y', spec], options(fresh))).toEqual({ command: 'npx', args: ['-y', spec] });
    expect(fresh.at(-1)).toMatch(/npm install failed \(exit code \d+\); each session runs it through npx$/);
  });

  it('an exact version installed before starts without npm at all', async () => {
    const given = options();
    const spec = 'exact-mcp@1.0.0';
    // what an earlier install of it left, as the registry would have served it
    const installed = await packageLaunch('npx', ['-y', tarball('exact-mcp', { 'exact-mcp': 'index.js' })], given);
    const bin = installed.args[0]!;
    mkdirSync(installDir(given.cacheDir, spec), { recursive: true });
    writeFileSync(
      join(installDir(given.cacheDir, spec), 'aileron-launch.json'),
      JSON.stringify({ spec, bin, node: true }),
    );

    const log: string[] = [];
    // an npm that cannot start: any attempt to run it would fail the resolution
    const launch = await packageLaunch('/nowhere/npx', ['-y', spec], { ...given, log: (line) => log.push(line) });
    expect(launch).toEqual({ command: '/usr/bin/node', args: [bin] });
    expect(log).toEqual([`${spec}: runs ${bin} (installed before)`]);
  });
});
