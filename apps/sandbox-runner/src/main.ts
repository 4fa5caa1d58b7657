/**
 * The sandbox's runner: started by the driver inside the sandbox (bubblewrap
 * locally, the pod's container on Kubernetes), it carries out the control
 * plane's requests there, so every path resolves in the sandbox's own
 * filesystem and every command runs in its namespaces. It is bundled into
 * one file (scripts/build-bundles.mjs): nothing else of ours is mounted.
 *
 * Protocol (@aileron/sandboxes/runner-protocol): one JSON request per line on
 * stdin, one answer per line on stdout (its long strings after it, raw).
 * Requests run concurrently; the control plane serialises the ones that
 * change files.
 *
 * With `--listen [host:]port` (a pod's containers, which the control plane
 * reaches over the network) it speaks the same lines over TCP instead, to
 * each connection that first sends the bearer token in AILERON_RUNNER_TOKEN.
 * `--role history` makes it the runner of the container that holds the
 * sandbox's git history: it answers `git`, `receive` and `ping`, nothing else.
 */
import { RUNNER_TOKEN_ENV, RUNNER_VERSION_ENV } from '@aileron/sandboxes/runner-protocol';
import { requestHandler } from './requests';
import { fatal, listen, serveStdio } from './server';

// SIGUSR1 opens Node's inspector by default, and a debugger in the runner would answer the control plane's requests as it likes; Node 20 has no --disable-sigusr1
process.on('SIGUSR1', () => undefined);

function option(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
}

const role = option('--role') ?? 'sandbox';
if (role !== 'sandbox' && role !== 'history') fatal(`--role ${role}: sandbox or history`);
const at = option('--listen');
const handle = requestHandler({
  role,
  version: process.env[RUNNER_VERSION_ENV] || undefined,
  listening: at !== undefined,
});
if (at !== undefined) listen(at, process.env[RUNNER_TOKEN_ENV] ?? '', handle, role);
else serveStdio(handle);
