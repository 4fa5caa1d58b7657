/** The requests whose input follows them on the connection: `unpack` (an archive into /src) and `receive` (a file for the history's git). */
import { spawn } from 'node:child_process';
import { createWriteStream, promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { type RunnerRequest, type RunnerResults, SANDBOX_WORKDIR } from '@aileron/sandboxes/runner-protocol';
import { Failure } from '../failure';
import { COMMAND_PATH } from '../sandbox-paths';
import { bounded, collector } from '../streams';

/**
 * A tar (or tar.gz) into /src, unpacked by GNU tar as the sandbox's user, in
 * the sandbox: tar itself drops a leading `/` and refuses (exit 2) members
 * whose path has `..`, and places links pointing elsewhere only after every
 * file, so no member is written through one. Decompressed here, to count it:
 * an archive that unpacks to more than `maxBytes` is stopped there.
 */
export async function unpack(
  request: Extract<RunnerRequest, { op: 'unpack' }>,
  input: Readable,
): Promise<RunnerResults['unpack']> {
  // --ignore-zeros: tar reads its input to the end instead of exiting at the archive's end marker, which
  // would close its stdin while the input's last lines are on their way and fail an archive it took whole
  const child = spawn(
    '/usr/bin/tar',
    [
      '-x',
      '--ignore-zeros',
      '-f',
      '-',
      '-C',
      SANDBOX_WORKDIR,
      '--no-same-owner',
      '--no-same-permissions',
      '--delay-directory-restore',
    ],
    {
      cwd: SANDBOX_WORKDIR,
      env: { PATH: COMMAND_PATH, LANG: 'C.UTF-8' },
      stdio: ['pipe', 'ignore', 'pipe'],
    },
  );
  const stderr = collector();
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
  const exited = new Promise<number>((resolveExit) => {
    child.on('error', () => resolveExit(127));
    child.on('close', (code) => resolveExit(code ?? 1));
  });
  const said = (): string =>
    stderr
      .text()
      .trim()
      .split('\n')
      .filter((line) => !/Exiting with failure status/.test(line))
      .slice(-3)
      .join('; ');
  const count = bounded(
    request.maxBytes,
    () => new Failure('TOO_LARGE', `the archive unpacks to more than ${request.maxBytes} bytes, what /src holds`),
  );
  try {
    if (request.gzip) await pipeline(input, createGunzip(), count.counter, child.stdin);
    else await pipeline(input, count.counter, child.stdin);
  } catch (error) {
    child.kill('SIGKILL');
    await exited;
    if (error instanceof Failure) throw error;
    const code = (error as NodeJS.ErrnoException).code ?? '';
    if (code.startsWith('Z_'))
      throw new Failure('NOT_GZIP', `not a gzip-compressed archive (${(error as Error).message})`);
    throw new Failure('UNPACK_FAILED', said() || (error as Error).message);
  }
  const code = await exited;
  if (code !== 0) throw new Failure('UNPACK_FAILED', said() || `tar exited with code ${code}`);
  return { bytes: count.bytes() };
}

/**
 * An input written to a directory of its own in this container's /tmp (its
 * scratch space: not /src, not the history), for git to read by path; the
 * directory goes when the connection closes (`keep`), or at once if the
 * input fails or is larger than `maxBytes`.
 */
export async function receiveFile(
  request: Extract<RunnerRequest, { op: 'receive' }>,
  input: Readable,
  keep: (path: string) => void,
): Promise<RunnerResults['receive']> {
  const dir = await fs.mkdtemp(join(tmpdir(), 'aileron-input-'));
  keep(dir);
  const path = join(dir, 'input');
  const count = bounded(
    request.maxBytes,
    () =>
      new Failure(
        'TOO_LARGE',
        `the file is larger than ${request.maxBytes} bytes, what the history container's scratch space holds`,
      ),
  );
  try {
    await pipeline(input, count.counter, createWriteStream(path, { flags: 'wx', mode: 0o600 }));
  } catch (error) {
    await fs.rm(dir, { recursive: true, force: true });
    throw error;
  }
  return { path, bytes: count.bytes() };
}
