import { Button, Group, Modal, Stack, Text } from '@mantine/core';
import type { ReactNode } from 'react';
import { when } from './ui';

/** A change that cannot be taken back, asked once more: what it does, Cancel, and the action. */
export function Confirm({
  opened,
  title,
  action,
  color = 'red',
  loading,
  onConfirm,
  onClose,
  children,
}: {
  opened: boolean;
  title: string;
  /** the confirming button's word: Delete, Remove, Rotate, … */
  action: string;
  color?: string;
  loading: boolean;
  onConfirm: () => void;
  onClose: () => void;
  children: ReactNode;
}) {
  return (
    <Modal opened={opened} onClose={onClose} title={title}>
      <Stack>
        <Text>{children}</Text>
        <Group justify="flex-end">
          <Button variant="default" onClick={onClose}>
            Cancel
          </Button>
          <Button color={color} loading={loading} onClick={onConfirm}>
            {action}
          </Button>
        </Group>
      </Stack>
    </Modal>
  );
}

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
