import { Anchor, Badge, Button, Modal, Select, Stack, Table, TextInput } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { notifications } from '@mantine/notifications';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate } from 'react-router';
import { api, unwrap } from '../api/client';
import { usePagedList } from '../app/paging';
import { EmptyState, PagedList, PageTitle } from '../app/ui';

/** The organisation's catalog of MCP servers. */
export default function Catalog() {
  const { query, items } = usePagedList(['catalog'], (cursor) =>
    unwrap(api.GET('/v1/catalog/servers', { params: { query: { cursor } } })),
  );
  const [adding, { open, close }] = useDisclosure();
  return (
    <>
      <PageTitle actions={<Button onClick={open}>Add server</Button>}>Catalog</PageTitle>
      <PagedList
        query={query}
        count={items.length}
        what="the catalog"
        empty={
          <EmptyState title="The catalog is empty">
            Add the MCP servers your organisation approves; then assign them to workspaces.
          </EmptyState>
        }
      >
        <Table>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Server</Table.Th>
              <Table.Th>Latest version</Table.Th>
              <Table.Th>Versions</Table.Th>
              <Table.Th>State</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {items.map((s) => (
              <Table.Tr key={s.name}>
                <Table.Td>
                  <Anchor component={Link} to={`/catalog/${s.name}`} size="sm">
                    {s.name}
                  </Anchor>
                </Table.Td>
                <Table.Td>{s.latest_version ?? '—'}</Table.Td>
                <Table.Td>{s.versions.length}</Table.Td>
                <Table.Td>
                  {s.enabled ? <Badge color="green">enabled</Badge> : <Badge color="red">disabled</Badge>}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </PagedList>
      <Modal opened={adding} onClose={close} title="Add a server version">
        <AddServer onDone={close} />
      </Modal>
    </>
  );
}

/** A new server, or a new version of one: a remote server by URL, or a local one by command. */
export function AddServer({ onDone, name: fixedName }: { onDone: () => void; name?: string }) {
  const [name, setName] = useState(fixedName ?? '');
  const [version, setVersion] = useState('1.0.0');
  const [mode, setMode] = useState<'remote' | 'local'>('remote');
  const [target, setTarget] = useState('');
  const [description, setDescription] = useState('');
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const add = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/v1/catalog/servers', {
          body:
            mode === 'remote'
              ? {
                  name,
                  version,
                  mode,
                  transport: 'streamable_http',
                  url: target,
                  ...(description ? { description } : {}),
                }
              : { name, version, mode, transport: 'stdio', command: target, ...(description ? { description } : {}) },
        }),
      ),
    onSuccess: () => {
      notifications.show({ color: 'green', message: `${name} ${version} published` });
      void queryClient.invalidateQueries({ queryKey: ['catalog'] });
      onDone();
      void navigate(`/catalog/${name}`);
    },
  });
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        add.mutate();
      }}
    >
      <Stack>
        <TextInput
          label="Name"
          required
          value={name}
          disabled={fixedName !== undefined}
          onChange={(e) => setName(e.currentTarget.value)}
          data-autofocus
        />
        <TextInput
          label="Version"
          description="Semantic version; versions never change once published"
          required
          value={version}
          onChange={(e) => setVersion(e.currentTarget.value)}
        />
        <Select
          label="Runs"
          data={[
            { value: 'remote', label: 'Remote: the central pool reaches it over Streamable HTTP' },
            { value: 'local', label: "Local: the gateway starts it on the developer's machine" },
          ]}
          value={mode}
          allowDeselect={false}
          onChange={(m) => setMode(m === 'local' ? 'local' : 'remote')}
        />
        <TextInput
          label={mode === 'remote' ? 'URL' : 'Command'}
          required
          value={target}
          onChange={(e) => setTarget(e.currentTarget.value)}
        />
        <TextInput label="Description" value={description} onChange={(e) => setDescription(e.currentTarget.value)} />
        <Button type="submit" loading={add.isPending}>
          Publish
        </Button>
      </Stack>
    </form>
  );
}
