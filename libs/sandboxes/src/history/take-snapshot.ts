/**
 * One snapshot, the same on every driver: the sandbox's runner says what
 * changed (it walks and hashes /src inside the sandbox), the history gets
 * the bytes it lacks, and git builds the commit from them with fast-import
 * in the history's bare repository. Git never reads the agent's files.
 */
import {
  changesAgainst,
  type CommitChange,
  fastImportStream,
  inBatches,
  isTreeEntry,
  isTreePath,
  parseLsTree,
} from '../domain/snapshot-tree';
import type { SandboxDriver, SandboxSpec } from '../drivers/driver';
import type { TreeChange, TreeEntry } from '../runner-protocol';
import { SNAPSHOT_REF } from '../source-import';

/** the bytes one `blobs` request asks of the runner at most */
const BLOB_BATCH_BYTES = 32 * 1024 * 1024;
const COMMITTER = { name: 'Aileron snapshots', email: 'snapshots@aileron.invalid' };

export interface SnapshotRequest {
  author: { name: string; email: string };
  message: string;
  at: Date;
  /** a tree with more files is not snapshotted; changed files larger in all are not either */
  limits: { maxFiles: number; maxBytes: number };
}

export interface Snapshot {
  sha: string;
  files: { path: string; status: string }[];
  /** files left out, larger than a snapshot takes */
  skipped: string[];
}

/** A snapshot the history refused to take from what the sandbox reported. */
export class SnapshotError extends Error {}

/** The commit of what differs from the snapshot branch's head; null when nothing does (never an empty commit). */
export async function takeSnapshot(
  driver: SandboxDriver,
  spec: SandboxSpec,
  request: SnapshotRequest,
): Promise<Snapshot | null> {
  const runner = await driver.runner(spec);
  const git = async (args: string[], input?: Buffer): Promise<string> => {
    const done = await driver.git(spec, args, input);
    if (done.code !== 0) throw new Error(`git ${args[0]} failed: ${done.stderr.trim()}`);
    return done.stdout.toString('utf8');
  };
  const head = await snapshotHead(driver, spec);
  const scan = await runner.call({ op: 'scan', base: head, maxEntries: request.limits.maxFiles });
  let changes: TreeChange[];
  if (scan.full) {
    if (!scan.entries.every(isTreeEntry))
      throw new SnapshotError('the sandbox reported a path or mode a tree cannot hold');
    changes = changesAgainst(
      head ? parseLsTree(await git(['ls-tree', '-r', '-z', '--full-tree', head])) : new Map(),
      scan.entries,
    );
  } else changes = scan.changes;
  if (!changes.every((change) => ('deleted' in change ? isTreePath(change.path) : isTreeEntry(change))))
    throw new SnapshotError('the sandbox reported a path or mode a tree cannot hold');
  if (changes.length === 0) {
    if (head) await runner.call({ op: 'adopt', base: head });
    return null;
  }
  const commitChanges: CommitChange[] = [];
  const entries: (TreeEntry & { before: string | null })[] = [];
  for (const change of changes) {
    if ('deleted' in change) commitChanges.push({ path: change.path, deleted: true });
    else entries.push(change);
  }
  // a file renamed, copied or written back needs no bytes: the history has them
  const have = await objectsPresent(
    driver,
    spec,
    entries.map((entry) => entry.sha),
  );
  for (const entry of entries)
    if (have.has(entry.sha)) commitChanges.push({ path: entry.path, mode: entry.mode, sha: entry.sha });
  let total = 0;
  for (const batch of inBatches(
    entries.filter((entry) => !have.has(entry.sha)),
    BLOB_BATCH_BYTES,
  )) {
    // read now by the runner: what it reads is what is committed, and what it adopts
    const read = await runner.call({ op: 'blobs', paths: batch.map((entry) => entry.path) });
    const data = Buffer.isBuffer(read.data) ? read.data : Buffer.alloc(0);
    let offset = 0;
    for (const item of read.items) {
      if ('gone' in item) {
        if (isTreePath(item.path)) commitChanges.push({ path: item.path, deleted: true });
        continue;
      }
      if (!isTreeEntry(item) || offset + item.size > data.length)
        throw new SnapshotError('the sandbox sent files that do not match what it listed');
      commitChanges.push({ path: item.path, mode: item.mode, data: data.subarray(offset, offset + item.size) });
      offset += item.size;
      total += item.size;
      if (total > request.limits.maxBytes)
        throw new SnapshotError(
          `the changed files are larger than ${request.limits.maxBytes} bytes, more than a snapshot takes`,
        );
    }
  }
  const left =
    scan.skipped.length > 0
      ? `\n\nLeft out (larger than a snapshot takes): ${scan.skipped.slice(0, 20).join(', ')}${scan.skipped.length > 20 ? ', …' : ''}`
      : '';
  await git(
    ['fast-import', '--quiet', '--done'],
    fastImportStream({
      ref: SNAPSHOT_REF,
      parent: head,
      author: request.author,
      committer: COMMITTER,
      at: request.at,
      message: request.message + left,
      changes: commitChanges,
    }),
  );
  // one git for the commit's id and what it changed: it prints nothing when the changes came back to what was
  // (files written again with their own bytes, or gone while read), and then there is no commit after all
  const [sha, ...changed] = (await git(['diff-tree', '--root', '-r', '-M', '-z', '--name-status', SNAPSHOT_REF]))
    .split('\0')
    .filter((field) => field !== '');
  if (!sha) {
    await git(head ? ['update-ref', SNAPSHOT_REF, head] : ['update-ref', '-d', SNAPSHOT_REF]);
    if (head) await runner.call({ op: 'adopt', base: head });
    return null;
  }
  await runner.call({ op: 'adopt', base: sha });
  return { sha, files: parseNameStatus(changed), skipped: scan.skipped };
}

/** the snapshot branch's commit; null before the first */
export async function snapshotHead(driver: SandboxDriver, spec: SandboxSpec): Promise<string | null> {
  const head = await driver.git(spec, ['rev-parse', '--verify', '--quiet', `${SNAPSHOT_REF}^{commit}`]);
  return head.code === 0 ? head.stdout.toString().trim() : null;
}

async function objectsPresent(driver: SandboxDriver, spec: SandboxSpec, shas: string[]): Promise<Set<string>> {
  const unique = [...new Set(shas)];
  if (unique.length === 0) return new Set();
  const checked = await driver.git(
    spec,
    ['cat-file', '--batch-check=%(objectname) %(objecttype)'],
    Buffer.from(`${unique.join('\n')}\n`),
  );
  if (checked.code !== 0) return new Set();
  const present = new Set<string>();
  for (const line of checked.stdout.toString('utf8').split('\n'))
    if (line.endsWith(' blob')) present.add(line.slice(0, 40));
  return present;
}

function parseNameStatus(fields: string[]): { path: string; status: string }[] {
  const files: { path: string; status: string }[] = [];
  for (let i = 0; i < fields.length; ) {
    const status = fields[i++]!;
    // renames and copies name the old path, then the new one
    if (status.startsWith('R') || status.startsWith('C')) {
      i++;
      files.push({ path: fields[i++]!, status: status[0]! });
    } else files.push({ path: fields[i++]!, status });
  }
  return files;
}
