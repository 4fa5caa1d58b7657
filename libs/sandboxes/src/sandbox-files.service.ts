import { Inject, Injectable } from '@nestjs/common';
import type { WorkspaceScope } from '@aileron/auth';
import { NotFoundError, ValidationError } from '@aileron/errors';
import { asText, compareEntries, isBrowsablePath, type ListedEntry, parseTreeListing } from './domain/tree-listing';
import type { SandboxDriver } from './drivers/driver';
import { SandboxesRepository, type SandboxRecord } from './sandboxes.repository';
import { SANDBOX_DRIVER, SandboxesService, specOf } from './sandboxes.service';
import { SNAPSHOT_REF } from './source-import';

/** A file larger than this is named, not shown: the bundle has it whole. */
export const FILE_VIEW_MAX_BYTES = 1024 * 1024;

export interface BrowsedFile {
  commit: string;
  path: string;
  kind: ListedEntry['kind'];
  size: number;
  /** null when the bytes are not text or the file is over FILE_VIEW_MAX_BYTES */
  text: string | null;
  binary: boolean;
  too_large: boolean;
}

/**
 * A sandbox's files as its history holds them, read-only: a snapshot's tree
 * (the newest by default) and a file's text. Only git over the history reads
 * them, never the runner: browsing neither wakes a stopped sandbox nor runs
 * anything over the agent's files, and a reviewer sees exactly what a
 * snapshot committed.
 */
@Injectable()
export class SandboxFilesService {
  constructor(
    private readonly sandboxes: SandboxesService,
    private readonly repository: SandboxesRepository,
    @Inject(SANDBOX_DRIVER) private readonly driver: SandboxDriver,
  ) {}

  /** One directory's entries, directories first; `commit` null while the sandbox has no commit. */
  async list(
    scope: WorkspaceScope,
    name: string,
    at: string | undefined,
    dir: string,
  ): Promise<{ commit: string | null; entries: ListedEntry[] }> {
    checkPath(dir);
    const sandbox = await this.sandboxes.get(scope, name);
    const commit = await this.commitOf(scope, sandbox, at);
    if (!commit) {
      if (dir !== '') throw pathNotFound(dir);
      return { commit: null, entries: [] };
    }
    return { commit, entries: (await this.directory(sandbox, commit, dir)).sort(compareEntries) };
  }

  /** One file's text at a snapshot (the newest by default): a link's is its target. */
  async read(scope: WorkspaceScope, name: string, at: string | undefined, path: string): Promise<BrowsedFile> {
    checkPath(path);
    if (path === '') throw pathNotFound(path);
    const sandbox = await this.sandboxes.get(scope, name);
    const commit = await this.commitOf(scope, sandbox, at);
    if (!commit) throw pathNotFound(path);
    const slash = path.lastIndexOf('/');
    const entry = (await this.directory(sandbox, commit, slash < 0 ? '' : path.slice(0, slash))).find(
      (e) => e.name === path.slice(slash + 1),
    );
    if (!entry || entry.size === null) throw pathNotFound(path);
    const base = { commit, path, kind: entry.kind, size: entry.size };
    if (entry.size > FILE_VIEW_MAX_BYTES) return { ...base, text: null, binary: false, too_large: true };
    const blob = await this.driver.git(specOf(sandbox), ['cat-file', 'blob', entry.object]);
    if (blob.code !== 0) throw pathNotFound(path);
    const text = asText(blob.stdout);
    return { ...base, text, binary: text === null, too_large: false };
  }

  /** The commit asked for (one of this sandbox's snapshots), else the snapshot branch's head; null when there is none. */
  private async commitOf(
    scope: WorkspaceScope,
    sandbox: SandboxRecord,
    at: string | undefined,
  ): Promise<string | null> {
    if (at !== undefined) {
      if (!/^[0-9a-f]{40}$/.test(at) || !(await this.repository.snapshot(scope, sandbox.id, at)))
        throw new NotFoundError('snapshot', at, 'SNAPSHOT_NOT_FOUND');
      return at;
    }
    // a reviewer reads their own writes, as the snapshot list does
    await this.sandboxes.settled(sandbox);
    const head = await this.driver.git(specOf(sandbox), [
      'rev-parse',
      '--verify',
      '--quiet',
      `${SNAPSHOT_REF}^{commit}`,
    ]);
    return head.code === 0 ? head.stdout.toString('utf8').trim() : null;
  }

  private async directory(sandbox: SandboxRecord, commit: string, dir: string): Promise<ListedEntry[]> {
    // `<commit>:<path>` takes the rest of the argument as the path, literally
    const listed = await this.driver.git(specOf(sandbox), [
      'ls-tree',
      '-z',
      '-l',
      dir === '' ? `${commit}^{tree}` : `${commit}:${dir}`,
    ]);
    if (listed.code !== 0) throw pathNotFound(dir);
    return parseTreeListing(listed.stdout.toString('utf8'));
  }
}

function checkPath(path: string): void {
  if (!isBrowsablePath(path))
    throw new ValidationError([
      { path: 'query.path', message: 'must be a relative path without empty, "." or ".." parts' },
    ]);
}

function pathNotFound(path: string): NotFoundError {
  return new NotFoundError('path', path || '/', 'SANDBOX_PATH_NOT_FOUND');
}
