import { closeSync, openSync } from 'node:fs';
import { basename, dirname } from 'node:path';

/** sun_path holds 108 bytes with its NUL; a little less, to be safe */
const MAX_SOCKET_PATH = 100;

/**
 * An address for a unix socket at `path` that fits in a sockaddr_un: the path
 * itself when short, else the same file reached through an open descriptor of
 * its directory (`/proc/self/fd/N/name`, Linux), since an instance's
 * directory under the data directory can be longer than a socket path may be.
 * `release` closes that descriptor once the socket is bound or connected.
 */
export function socketAddress(path: string): { address: string; release(): void } {
  if (Buffer.byteLength(path) <= MAX_SOCKET_PATH) return { address: path, release: () => undefined };
  const fd = openSync(dirname(path), 'r');
  return { address: `/proc/self/fd/${fd}/${basename(path)}`, release: () => closeSync(fd) };
}
