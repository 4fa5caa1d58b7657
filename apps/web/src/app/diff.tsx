import { Badge, Card, Group, SimpleGrid, Stack, Table, Text } from '@mantine/core';
import { diffLines } from 'diff';
import { type FilePatch, rowsOf, splitGitPatch } from './patch';

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
          ) : file.unreadable ? (
            <Text size="sm" c="dimmed">
              This part of the change could not be read.
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
