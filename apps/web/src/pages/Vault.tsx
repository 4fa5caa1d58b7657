import {
  Alert,
  Badge,
  Button,
  Checkbox,
  Code,
  Group,
  Modal,
  PasswordInput,
  Stack,
  Switch,
  Table,
  Text,
  TextInput,
  VisuallyHidden,
} from '@mantine/core';
import { useDebouncedValue } from '@mantine/hooks';
import { notifications } from '@mantine/notifications';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { usePagedList } from '../app/paging';
import { WhenBy } from '../app/cells';
import { Confirm } from '../app/dialogs';
import { EmptyState, PagedList, PageTitle } from '../app/ui';

/**
 * The workspace's vault: paths, versions and who wrote and read them. Values
 * go one way: typed into a form, sent once, never shown again; no answer of
 * the API carries one, so nothing here can.
 */
export default function Vault() {
  const ws = useParams().ws!;
  const [prefix, setPrefix] = useState('');
  const [searched] = useDebouncedValue(prefix.trim(), 300);
  const { query, items } = usePagedList(['secrets', ws, searched], (cursor) =>
    unwrap(
      api.GET('/v1/workspaces/{ws}/secrets', {
        params: { path: { ws }, query: { cursor, ...(searched ? { prefix: searched } : {}) } },
      }),
    ),
  );
  const queryClient = useQueryClient();
  const refresh = () => queryClient.invalidateQueries({ queryKey: ['secrets', ws] });
  // a new secret (path ''), or a new version of one
  const [writing, setWriting] = useState<{ path: string; version: number; deliver: boolean } | null>(null);
  const [deleting, setDeleting] = useState<string | null>(null);
  const [rotatingKey, setRotatingKey] = useState(false);
  // a secret whose delivery to gateways is about to change, and to what
  const [delivering, setDelivering] = useState<{ path: string; deliver: boolean } | null>(null);
  const setDelivery = useMutation({
    mutationFn: ({ path, deliver }: { path: string; deliver: boolean }) =>
      unwrap(
        api.PATCH('/v1/workspaces/{ws}/secrets/{path}', {
          params: { path: { ws, path } },
          body: { deliver_to_gateways: deliver },
        }),
      ),
    onSuccess: (secret) => {
      setDelivering(null);
      notifications.show({
        color: 'green',
        message: `${secret.path}: gateways ${secret.deliver_to_gateways ? 'may' : 'may no longer'} receive it`,
      });
      void refresh();
    },
  });
  const remove = useMutation({
    mutationFn: (path: string) =>
      unwrap(api.DELETE('/v1/workspaces/{ws}/secrets/{path}', { params: { path: { ws, path } } })),
    onSuccess: () => {
      setDeleting(null);
      void refresh();
    },
  });
  const rotateKey = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/workspaces/{ws}/vault/rotate', { params: { path: { ws } } })),
    onSuccess: (answer) => {
      setRotatingKey(false);
      notifications.show({
        color: 'green',
        message: `Workspace key version ${answer.key_version}: ${answer.rewrapped} data key${answer.rewrapped === 1 ? '' : 's'} sealed under it`,
      });
    },
  });
  return (
    <>
      <PageTitle
        actions={
          <Group gap="xs">
            <Button variant="default" onClick={() => setRotatingKey(true)}>
              Rotate workspace key
            </Button>
            <Button onClick={() => setWriting({ path: '', version: 0, deliver: false })}>New secret</Button>
          </Group>
        }
      >
        Vault
      </PageTitle>
      <Text size="sm" c="dimmed" mb="md">
        Values are write-only: once written, no page and no API shows them again. A catalog entry uses a secret as{' '}
        <Code>vault://path</Code> (or <Code>vault://path#2</Code> for a version still kept). Remote servers in the pool
        read it on the server; a local server on a developer&apos;s machine gets it through its gateway only when the
        secret is delivered to gateways.
      </Text>
      <TextInput
        label="Paths starting with"
        placeholder="github/"
        maw={320}
        mb="md"
        value={prefix}
        onChange={(e) => setPrefix(e.currentTarget.value)}
      />
      <PagedList
        query={query}
        count={items.length}
        what="secrets"
        empty={
          <EmptyState title={searched ? 'No secret under this path' : 'No secrets'}>
            Secrets hold the credentials remote servers in the pool start with.
          </EmptyState>
        }
      >
        <Table aria-label="Secrets">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Path</Table.Th>
              <Table.Th>Versions kept</Table.Th>
              <Table.Th>Written</Table.Th>
              <Table.Th>Created</Table.Th>
              <Table.Th>Last read</Table.Th>
              <Table.Th>Gateways</Table.Th>
              <Table.Th>
                <VisuallyHidden>Actions</VisuallyHidden>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {items.map((s) => (
              <Table.Tr key={s.path}>
                <Table.Td>
                  <Code>{s.ref}</Code>
                </Table.Td>
                <Table.Td>
                  <Group gap={4} aria-label={`Versions of ${s.path}`}>
                    {[...s.versions]
                      .sort((a, b) => b - a)
                      .map((v) => (
                        <Badge key={v} variant={v === s.version ? 'filled' : 'light'} color="gray">
                          v{v}
                        </Badge>
                      ))}
                  </Group>
                </Table.Td>
                <Table.Td>
                  <WhenBy at={s.updated_at} by={s.updated_by} />
                </Table.Td>
                <Table.Td>
                  <WhenBy at={s.created_at} by={s.created_by} />
                </Table.Td>
                <Table.Td>
                  <WhenBy at={s.last_read_at} by={s.last_read_by} never="never" />
                </Table.Td>
                <Table.Td>
                  <Switch
                    aria-label={`Deliver ${s.path} to gateways`}
                    label={s.deliver_to_gateways ? 'delivered' : 'not delivered'}
                    checked={s.deliver_to_gateways}
                    onChange={(e) => setDelivering({ path: s.path, deliver: e.currentTarget.checked })}
                  />
                </Table.Td>
                <Table.Td>
                  <Group gap={4} justify="flex-end" wrap="nowrap">
                    <Button
                      variant="subtle"
                      size="xs"
                      aria-label={`Rotate ${s.path}`}
                      onClick={() => setWriting({ path: s.path, version: s.version, deliver: s.deliver_to_gateways })}
                    >
                      Rotate
                    </Button>
                    <Button
                      variant="subtle"
                      color="red"
                      size="xs"
                      aria-label={`Delete ${s.path}`}
                      onClick={() => setDeleting(s.path)}
                    >
                      Delete
                    </Button>
                  </Group>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </PagedList>
      <Modal
        opened={writing !== null}
        onClose={() => setWriting(null)}
        title={writing?.path ? `Rotate ${writing.path}` : 'New secret'}
      >
        {writing !== null && (
          <WriteSecret
            ws={ws}
            path={writing.path}
            version={writing.version}
            deliver={writing.deliver}
            onDone={() => {
              setWriting(null);
              void refresh();
            }}
          />
        )}
      </Modal>
      <Confirm
        opened={deleting !== null}
        onClose={() => setDeleting(null)}
        title="Delete secret"
        action="Delete"
        color="red"
        loading={remove.isPending}
        onConfirm={() => deleting && remove.mutate(deleting)}
      >
        Delete <Code>{deleting}</Code> and every version of it? Servers that start with it fail until it is written
        again; the audit log keeps who deleted it.
      </Confirm>
      <Confirm
        opened={delivering !== null}
        onClose={() => setDelivering(null)}
        title={delivering?.deliver ? 'Deliver to gateways' : 'Stop delivering to gateways'}
        action={delivering?.deliver ? 'Deliver' : 'Stop delivering'}
        color={delivering?.deliver ? undefined : 'red'}
        loading={setDelivery.isPending}
        onConfirm={() => delivering && setDelivery.mutate(delivering)}
      >
        {delivering?.deliver ? (
          <>
            Let the workspace&apos;s gateways receive <Code>{delivering.path}</Code>? A gateway gets the value to start
            a local server whose catalog entry names it, and it stays on that developer&apos;s machine while the server
            runs. Each read is an audit record naming the gateway.
          </>
        ) : (
          <>
            Stop gateways receiving <Code>{delivering?.path}</Code>? Local servers that name it no longer start; a
            gateway that already started one keeps the value it got until that server stops.
          </>
        )}{' '}
        The change is recorded in the audit log.
      </Confirm>
      <Confirm
        opened={rotatingKey}
        onClose={() => setRotatingKey(false)}
        title="Rotate the workspace key"
        action="Rotate"
        loading={rotateKey.isPending}
        onConfirm={() => rotateKey.mutate()}
      >
        A new workspace key seals every secret's data key; values are not re-encrypted and nothing stops. The old key is
        no longer used.
      </Confirm>
    </>
  );
}

/** A new secret (`path` empty) or a new version of one: the value is sent once and forgotten with the form. */
function WriteSecret({
  ws,
  path: existing,
  version,
  deliver: delivered,
  onDone,
}: {
  ws: string;
  path: string;
  version: number;
  /** whether the secret is delivered to gateways now (false for a new one) */
  deliver: boolean;
  onDone: () => void;
}) {
  const [path, setPath] = useState(existing);
  const [value, setValue] = useState('');
  const [deliver, setDeliver] = useState(delivered);
  const write = useMutation({
    mutationFn: () =>
      unwrap(
        api.PUT('/v1/workspaces/{ws}/secrets/{path}', {
          params: { path: { ws, path } },
          body: { value, deliver_to_gateways: deliver },
        }),
      ),
    onSuccess: (secret) => {
      setValue('');
      notifications.show({ color: 'green', message: `${secret.path}: version ${secret.version} written` });
      onDone();
    },
  });
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        write.mutate();
      }}
    >
      <Stack>
        {existing ? (
          <Alert color="blue">
            The value becomes version {version + 1} of <Code>{existing}</Code>: servers started from now on get it;
            version {version} stays usable as{' '}
            <Code>
              vault://{existing}#{version}
            </Code>{' '}
            while it is kept.
          </Alert>
        ) : (
          <TextInput
            label="Path"
            description="Segments of letters, digits, _ . - separated by /"
            placeholder="github/token"
            required
            data-autofocus
            value={path}
            onChange={(e) => setPath(e.currentTarget.value)}
          />
        )}
        <PasswordInput
          label={existing ? 'New value' : 'Value'}
          description="Write-only: it cannot be shown again"
          required
          autoComplete="off"
          data-autofocus={existing ? true : undefined}
          value={value}
          onChange={(e) => setValue(e.currentTarget.value)}
        />
        <Checkbox
          label="Deliver to gateways"
          description="The workspace's gateways may receive it to start local servers that name it; each read is audited"
          checked={deliver}
          onChange={(e) => setDeliver(e.currentTarget.checked)}
        />
        <Button type="submit" loading={write.isPending}>
          {existing ? 'Write new version' : 'Write'}
        </Button>
      </Stack>
    </form>
  );
}
