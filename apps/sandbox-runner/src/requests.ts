import type { Readable } from 'node:stream';
import { type RunnerRequest, type RunnerRole, SANDBOX_WORKDIR } from '@aileron/sandboxes/runner-protocol';
import { Failure } from './failure';
import { exec, which } from './ops/exec';
import { ls, read, readText, remove, walk, write } from './ops/files';
import { grep } from './ops/grep';
import { historyGit } from './ops/history-git';
import { receiveFile, unpack } from './ops/inputs';
import { TreeScanner } from './ops/scan';

/** What a runner is, as its ping says. */
export interface RunnerIdentity {
  role: RunnerRole;
  /** RUNNER_VERSION_ENV when set */
  version?: string;
  /** listen mode: the ping names the role (a pod's two runners are told apart by it) */
  listening: boolean;
}

/** What a request comes with besides itself: where a streamed git's stdout goes, its input, and how a file of its connection is kept until that closes. */
export interface RequestContext {
  stream?: (chunk: Buffer) => Promise<void>;
  input?: Readable;
  keep?: (path: string) => void;
}

export type Handler = (request: RunnerRequest, context: RequestContext) => Promise<unknown>;

/** The requests whose input follows them. */
export const TAKES_INPUT: ReadonlySet<RunnerRequest['op']> = new Set(['unpack', 'receive']);

/** What this runner's role does not answer: the sandbox never touches the history, the history runs nothing but git (and keeps files for it). */
function refusedByRole(role: RunnerRole, request: RunnerRequest): Failure | undefined {
  if (request.op === 'ping') return undefined;
  const history = request.op === 'git' || request.op === 'receive';
  if (role === 'history' && !history)
    return new Failure('WRONG_ROLE', `the history runner answers ping, git and receive only, not ${request.op}`);
  if (role === 'sandbox' && history)
    return new Failure('WRONG_ROLE', `${request.op} runs in the history container, not in the sandbox`);
  return undefined;
}

/** Each request to the operation that answers it, once its role allows it. */
export function requestHandler(identity: RunnerIdentity): Handler {
  /** what the sandbox's files were at the last snapshot, as this runner knows it */
  const scanner = new TreeScanner(SANDBOX_WORKDIR);
  return async (request, { stream, input, keep }) => {
    const refused = refusedByRole(identity.role, request);
    if (refused) throw refused;
    switch (request.op) {
      case 'ping':
        return {
          pid: process.pid,
          ...(identity.version ? { version: identity.version } : {}),
          ...(identity.listening ? { role: identity.role } : {}),
        };
      case 'read':
        return read(request);
      case 'readText':
        return readText(request);
      case 'write':
        return write(request);
      case 'remove':
        return remove(request);
      case 'ls':
        return ls(request);
      case 'walk':
        return walk(request);
      case 'grep':
        return grep(request);
      case 'exec':
        return exec(request);
      case 'which':
        return which(request);
      case 'git':
        return historyGit(request, stream);
      case 'scan':
        return scanner.scan(request.base, request.maxEntries);
      case 'blobs':
        return scanner.blobs(request.paths);
      case 'adopt':
        scanner.adopt(request.base);
        return {};
      case 'unpack':
        if (!input) throw new Failure('NO_INPUT', 'unpack takes its archive on the same connection');
        return unpack(request, input);
      case 'receive':
        if (!input || !keep) throw new Failure('NO_INPUT', 'receive takes its file on the same connection');
        return receiveFile(request, input, keep);
    }
  };
}
