import { Alert, Badge, Button, Code, CopyButton, Group, Modal, Stack, Text } from '@mantine/core';
import type { ReactNode } from 'react';

/**
 * A credential the API shows once (a new token, an enrolment code): the
 * warning, the value to copy, and Done. Nothing keeps it after the dialog
 * closes.
 */
export function ShownOnce({
  what,
  value,
  note,
  children,
  onDone,
}: {
  /** "token", "code": named in the warning and the value's label */
  what: string;
  value: string;
  /** more in the warning, after "This is the only time …" */
  note?: ReactNode;
  /** below the value: how to use it */
  children?: ReactNode;
  onDone: () => void;
}) {
  return (
    <Stack>
      <Alert color="yellow" title="Copy it now">
        This is the only time the {what} is shown: you will not see it again.{note && <> {note}</>}
      </Alert>
      <Code block aria-label={`New ${what}`}>
        {value}
      </Code>
      {children}
      <Group justify="flex-end">
        <CopyButton value={value}>
          {({ copied, copy }) => (
            <Button variant="default" onClick={copy}>
              {copied ? 'Copied' : 'Copy'}
            </Button>
          )}
        </CopyButton>
        <Button onClick={onDone}>Done</Button>
      </Group>
    </Stack>
  );
}

/** A change that is hard to undo, behind a question: Cancel, or the action itself. */
export function Confirm({
  opened,
  title,
  children,
  action,
  color,
  loading,
  onConfirm,
  onClose,
}: {
  opened: boolean;
  title: string;
  /** what happens, in a sentence or two */
  children: ReactNode;
  /** the button's label: the action's name ("Revoke", "End session") */
  action: string;
  color?: string;
  loading?: boolean;
  onConfirm: () => void;
  onClose: () => void;
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

/** A credential's state in a list: revoked, or the button that asks to revoke it (behind a Confirm). */
export function Revocable({ revoked, name, onRevoke }: { revoked: boolean; name: string; onRevoke: () => void }) {
  return revoked ? (
    <Badge color="gray">revoked</Badge>
  ) : (
    <Button variant="subtle" color="red" size="xs" aria-label={`Revoke ${name}`} onClick={onRevoke}>
      Revoke
    </Button>
  );
}
