import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from '@aileron/config';
import type { FakeImage } from './process-kubelet';
import { freePorts } from './services';

/**
 * What the process kubelet needs to run sandbox pods: the sandbox image (the
 * runner as `npm run build` bundles it: one file), the runners' ports, and their listening address.
 */

export const SANDBOX_VERSION = (
  JSON.parse(readFileSync(join(projectRoot(), 'package.json'), 'utf8')) as { version: string }
).version;

/** Compiles the runner into `<dir>/opt-aileron` and makes images of it: the version its ENV carries, and an entrypoint that ignores the runner's arguments. */
export function sandboxImageMaker(dir: string): (version: string, entrypoint?: string[]) => FakeImage {
  const runnerDir = join(dir, 'opt-aileron');
  mkdirSync(runnerDir, { recursive: true });
  // the image's runner is the bundle `npm run build` makes: one file, as the Dockerfile copies it
  copyFileSync(join(projectRoot(), 'dist/sandbox-runner/runner.cjs'), join(runnerDir, 'runner.js'));
  return (version, entrypoint) => ({
    binds: [{ source: runnerDir, target: '/opt/aileron' }],
    env: { AILERON_MCP_VERSION: version, HOME: '/home/agent' },
    ...(entrypoint ? { entrypoint } : {}),
  });
}

/** The runner's `--listen <port>` as `--listen <podIP>:<port>`: what binding every address means in a pod's own network namespace. */
export function listenOnPodIP(args: string[], podIP: string): string[] {
  return args.map((arg, at) => (args[at - 1] === '--listen' ? `${podIP}:${arg}` : arg));
}

/** Ports for the two runners that nothing on this machine listens on, on any address (every pod here shares its network). */
export async function runnerPorts(): Promise<{ sandbox: number; history: number }> {
  const [sandbox, history] = await freePorts(2);
  return { sandbox: sandbox!, history: history! };
}
