import { Card, SimpleGrid } from '@mantine/core';
import { diffLines } from 'diff';

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
