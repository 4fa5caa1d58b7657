import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { JournalDirectory } from './journal-directory';

describe('JournalDirectory: each process its own journal, a dead one taken over once', () => {
  const roots: string[] = [];
  afterEach(() => roots.splice(0).forEach((root) => rmSync(root, { recursive: true, force: true })));
  const aRoot = () => {
    const root = mkdtempSync(join(tmpdir(), 'aileron-journal-dir-'));
    roots.push(root);
    return root;
  };
  const segment = (dir: string, name: string) => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, name), '{"id":"x"}\n');
  };

  it("leaves a live process's directory alone and claims a dead one's, and the bare segments of older releases", () => {
    const root = aRoot();
    segment(join(root, 'host~101~555'), '0001.jsonl'); // alive
    segment(join(root, 'host~102~666'), '0002.jsonl'); // dead
    segment(root, '0000000000000003.jsonl'); // an older release's layout
    const dir = new JournalDirectory(root, (owner) => owner.pid === 101);
    dir.open();
    const claimed = dir.claimOrphans();
    expect(claimed).toHaveLength(2);
    expect(claimed.flatMap((c) => dir.segments(c).map((f) => f.slice(c.length + 1))).sort()).toEqual([
      '0000000000000003.jsonl',
      '0002.jsonl',
    ]);
    expect(readdirSync(join(root, 'host~101~555'))).toEqual(['0001.jsonl']);
    // what it claimed carries its own name: while it lives nobody takes it; a second look finds nothing new
    const other = new JournalDirectory(root, (owner) => owner.pid !== 102 && owner.pid !== 999_999);
    expect(other.claimOrphans().filter((c) => dir.segments(c).length > 0)).toEqual([]);
    expect(dir.claimOrphans()).toEqual([]);
  });

  it('two survivors racing for one dead directory: exactly one gets it', () => {
    const root = aRoot();
    segment(join(root, 'host~102~666'), '0002.jsonl');
    const dead = (owner: { pid: number }) => owner.pid !== 102;
    const first = new JournalDirectory(root, dead);
    const second = new JournalDirectory(root, dead);
    const claims = [...first.claimOrphans(), ...second.claimOrphans()];
    expect(claims).toHaveLength(1);
    expect(first.segments(claims[0]!)).toHaveLength(1);
  });
});
