import { Button, Code, Modal, Select, Stack, Table, TextInput } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api/client';
import { Confirm, Revocable, ShownOnce } from '../app/dialogs';
import { usePagedList } from '../app/paging';
import { useMe } from '../app/session';
import { EmptyState, PagedList, PageTitle, when } from '../app/ui';
import { isRole, type Role, roleOptions } from './roles';

/** API tokens: metadata only; a new token is shown once, and a revoked one stops working at once. */
export default function Tokens() {
  const { query, items } = usePagedList(['tokens'], (cursor) =>
    unwrap(api.GET('/v1/tokens', { params: { query: { cursor } } })),
  );
  const queryClient = useQueryClient();
  const [creating, { open, close }] = useDisclosure();
  const [revoking, setRevoking] = useState<{ id: string; name: string } | null>(null);
  const revoke = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/v1/tokens/{id}', { params: { path: { id } } })),
    onSuccess: () => {
      setRevoking(null);
      void queryClient.invalidateQueries({ queryKey: ['tokens'] });
    },
  });
  return (
    <>
      <PageTitle actions={<Button onClick={open}>New token</Button>}>API tokens</PageTitle>
      <PagedList
        query={query}
        count={items.length}
        what="tokens"
        empty={<EmptyState title="No tokens">Tokens let the CLI and automation call the API.</EmptyState>}
      >
        <Table>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Role</Table.Th>
              <Table.Th>Workspace</Table.Th>
              <Table.Th>Prefix</Table.Th>
              <Table.Th>Last used</Table.Th>
              <Table.Th>State</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {items.map((t) => (
              <Table.Tr key={t.id}>
                <Table.Td>{t.name}</Table.Td>
                <Table.Td>{t.role}</Table.Td>
                <Table.Td>{t.workspace ?? 'every workspace'}</Table.Td>
                <Table.Td>
                  <Code>{t.prefix}…</Code>
                </Table.Td>
                <Table.Td>{when(t.last_used_at)}</Table.Td>
                <Table.Td>
                  <Revocable
                    revoked={t.revoked_at !== null}
                    name={t.name}
                    onRevoke={() => setRevoking({ id: t.id, name: t.name })}
                  />
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </PagedList>
      <Modal opened={creating} onClose={close} title="New API token">
        <CreateToken onDone={close} />
      </Modal>
      <Confirm
        opened={revoking !== null}
        onClose={() => setRevoking(null)}
        title="Revoke token"
        action="Revoke"
        color="red"
        loading={revoke.isPending}
        onConfirm={() => revoking && revoke.mutate(revoking.id)}
      >
        Revoke “{revoking?.name}”? Everything using it stops working at once.
      </Confirm>
    </>
  );
}

function CreateToken({ onDone }: { onDone: () => void }) {
  const me = useMe();
  const [name, setName] = useState('');
  const [role, setRole] = useState<Role>('member');
  const [workspace, setWorkspace] = useState<string | null>(null);
  const queryClient = useQueryClient();
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/tokens', { body: { name, role, ...(workspace ? { workspace } : {}) } })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['tokens'] }),
  });
  if (create.data) return <ShownOnce what="token" value={create.data.token} onDone={onDone} />;
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        create.mutate();
      }}
    >
      <Stack>
        <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} data-autofocus />
        <Select
          label="Role"
          data={roleOptions}
          value={role}
          allowDeselect={false}
          onChange={(r) => isRole(r) && setRole(r)}
        />
        <Select
          label="Workspace"
          description="Empty: every workspace of the organisation"
          clearable
          data={me.data?.workspaces.map((w) => ({ value: w.slug, label: w.name })) ?? []}
          value={workspace}
          onChange={setWorkspace}
        />
        <Button type="submit" loading={create.isPending}>
          Create
        </Button>
      </Stack>
    </form>
  );
}
