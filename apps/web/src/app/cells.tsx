import { Text } from '@mantine/core';
import { when } from './ui';

/** A table cell's "when, and by whom": the time, the actor under it. */
export function WhenBy({ at, by, never = '—' }: { at: string | null; by: string | null; never?: string }) {
  return (
    <>
      {at ? when(at) : never}
      {by && (
        <Text size="xs" c="dimmed">
          {by}
        </Text>
      )}
    </>
  );
}
