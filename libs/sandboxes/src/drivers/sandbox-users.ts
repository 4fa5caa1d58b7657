import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { DirectoryUsers, HOST_UID_COUNT } from '@aileron/bubblewrap';

/** How many uids the range holds: one per sandbox of this machine. */
export const SANDBOX_UID_COUNT = HOST_UID_COUNT;

/**
 * The host uid each sandbox runs as when the control plane is root (see
 * DirectoryUsers): recorded as the owner of the sandbox's /src directory.
 * The history beside it stays root's, out of its reach.
 */
export class SandboxUsers extends DirectoryUsers {
  constructor(stateDir: string, base: number) {
    super({ base, what: 'sandbox', directories: () => readdirSync(stateDir).map((id) => join(stateDir, id, 'src')) });
  }
}
