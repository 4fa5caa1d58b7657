import { Badge, Card, Group, SimpleGrid, Stack, Table, Text } from '@mantine/core';
import { diffLines, parsePatch, type StructuredPatchHunk } from 'diff';

/**
 * Two texts side by side, the lines only one of them has marked (removed on
 * the left, added on the right). Pages that compare versions use it: catalog
 * definitions, policy documents.
 */
export function SideBySide({
  before,
  after,
  beforeLabel,
  afterLabel,
}: {
  before: string;
  after: string;
  beforeLabel: string;
  afterLabel: string;
}) {
  const parts = diffLines(before, after);
  return (
    <SimpleGrid cols={{ base: 1, sm: 2 }}>
      {[beforeLabel, afterLabel].map((label, side) => (
        <Card withBorder key={side} component="figure" m={0} aria-label={label}>
          <pre className="console-pre">
            {parts.map((part, i) =>
              (side === 0 && part.added) || (side === 1 && part.removed) ? null : (
                <span
                  key={i}
                  className={part.added ? 'console-diff-add' : part.removed ? 'console-diff-del' : undefined}
                >
                  {part.value}
                </span>
              ),
            )}
          </pre>
        </Card>
      ))}
    </SimpleGrid>
  );
}

/** One file of a git patch (`git show --patch`): its names, whether git called it binary, its hunks. */
export interface FilePatch {
  /** the name it has after the change (before it, for a deleted file) */
  name: string;
  /** the name before a rename */
  renamedFrom: string | null;
  status: 'added' | 'deleted' | 'renamed' | 'modified';
  binary: boolean;
  hunks: StructuredPatchHunk[];
}

/**
 * A git patch of several files, one entry per file. Each `diff --git` part
 * is read on its own: jsdiff alone would fold a binary file's part (which
 * has no `---` line) into its neighbour's.
 */
export function splitGitPatch(text: string): FilePatch[] {
  const parts = text.split(/^(?=diff --git )/m).filter((part) => part.startsWith('diff --git '));
  return parts.map((part) => {
    const lines = part.split('\n');
    const firstHunk = lines.findIndex((l) => l.startsWith('@@'));
    const header = firstHunk < 0 ? lines : lines.slice(0, firstHunk);
    const has = (prefix: string) => header.some((l) => l.startsWith(prefix));
    const after = (prefix: string) => header.find((l) => l.startsWith(prefix))?.slice(prefix.length) ?? null;
    const [parsed] = has('--- ') ? parsePatch(part) : [];
    const strip = (name: string | undefined) =>
      name === undefined || name === '/dev/null' ? null : name.replace(/^[ab]\//, '');
    // `diff --git a/<p> b/<p>`: the same path twice when nothing was renamed
    const both = lines[0]!.slice('diff --git '.length);
    const path = both.slice(2, (both.length - 1) / 2);
    const same = both === `a/${path} b/${path}` ? path : null;
    const newName = after('rename to ') ?? strip(parsed?.newFileName) ?? same;
    const oldName = after('rename from ') ?? strip(parsed?.oldFileName) ?? same;
    return {
      name: newName ?? oldName ?? both,
      renamedFrom: has('rename from ') ? oldName : null,
      status: has('new file mode')
        ? 'added'
        : has('deleted file mode')
          ? 'deleted'
          : has('rename from ')
            ? 'renamed'
            : 'modified',
      binary: has('Binary files ') || has('GIT binary patch'),
      hunks: parsed?.hunks ?? [],
    };
  });
}

interface Side {
  line: number;
  text: string;
  changed: boolean;
}

/** A hunk as rows of two sides: unchanged lines on both, a run of removed lines beside the added lines that replace it. */
export function rowsOf(hunk: StructuredPatchHunk): { before: Side | null; after: Side | null }[] {
  const rows: { before: Side | null; after: Side | null }[] = [];
  let oldLine = hunk.oldStart;
  let newLine = hunk.newStart;
  let removed: Side[] = [];
  let added: Side[] = [];
  const flush = () => {
    for (let i = 0; i < Math.max(removed.length, added.length); i++)
      rows.push({ before: removed[i] ?? null, after: added[i] ?? null });
    removed = [];
    added = [];
  };
  for (const line of hunk.lines) {
    const text = line.slice(1);
    if (line.startsWith('-')) removed.push({ line: oldLine++, text, changed: true });
    else if (line.startsWith('+')) added.push({ line: newLine++, text, changed: true });
    else if (line.startsWith(' ')) {
      flush();
      rows.push({
        before: { line: oldLine++, text, changed: false },
        after: { line: newLine++, text, changed: false },
      });
    }
    // "\ No newline at end of file" belongs to the line before it
  }
  flush();
  return rows;
}

/**
 * A git patch side by side, file by file: the text before on the left, after
 * on the right, a removed line marked on the left beside the line that
 * replaced it, marked on the right. Sandbox snapshots use it.
 */
export function PatchSideBySide({ patch }: { patch: string }) {
  const files = splitGitPatch(patch);
  if (files.length === 0) return <Text c="dimmed">No change to show.</Text>;
  return (
    <Stack>
      {files.map((file) => (
        <Card withBorder key={file.name} component="figure" m={0} aria-label={`Changes to ${file.name}`} p="xs">
          <Group gap="xs" mb="xs">
            <Text fw={600} ff="monospace" size="sm">
              {file.renamedFrom ? `${file.renamedFrom} → ${file.name}` : file.name}
            </Text>
            <Badge variant="light" color={STATUS_COLOR[file.status]}>
              {file.status}
            </Badge>
          </Group>
          {file.binary ? (
            <Text size="sm" c="dimmed">
              A binary file: its bytes are not shown.
            </Text>
          ) : file.hunks.length === 0 ? (
            <Text size="sm" c="dimmed">
              No change to its text.
            </Text>
          ) : (
            <Table className="console-patch" layout="fixed" withColumnBorders verticalSpacing={0}>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th w="3.5rem">Line</Table.Th>
                  <Table.Th>Before</Table.Th>
                  <Table.Th w="3.5rem">Line</Table.Th>
                  <Table.Th>After</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {file.hunks.map((hunk, h) => [
                  <Table.Tr key={`h${h}`}>
                    <Table.Td colSpan={4} c="dimmed" ff="monospace" fz="xs">
                      @@ -{hunk.oldStart},{hunk.oldLines} +{hunk.newStart},{hunk.newLines} @@
                    </Table.Td>
                  </Table.Tr>,
                  ...rowsOf(hunk).map((row, r) => (
                    <Table.Tr key={`h${h}r${r}`}>
                      <Table.Td c="dimmed">{row.before?.line}</Table.Td>
                      <Table.Td className={row.before?.changed ? 'console-diff-del' : undefined}>
                        {row.before?.text}
                      </Table.Td>
                      <Table.Td c="dimmed">{row.after?.line}</Table.Td>
                      <Table.Td className={row.after?.changed ? 'console-diff-add' : undefined}>
                        {row.after?.text}
                      </Table.Td>
                    </Table.Tr>
                  )),
                ])}
              </Table.Tbody>
            </Table>
          )}
        </Card>
      ))}
    </Stack>
  );
}

const STATUS_COLOR: Record<FilePatch['status'], string> = {
  added: 'green',
  deleted: 'red',
  renamed: 'blue',
  modified: 'gray',
};
