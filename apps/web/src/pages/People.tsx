import { Button, Modal, Select, Stack, Table, TextInput } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { notifications } from '@mantine/notifications';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api/client';
import { usePagedList } from '../app/paging';
import { EmptyState, PagedList, PageTitle, when } from '../app/ui';
import { isRole, type Role, roleOptions } from './roles';

/** The organisation's people and their organisation-wide roles. */
export default function People() {
  const { query, items } = usePagedList(['users'], (cursor) =>
    unwrap(api.GET('/v1/users', { params: { query: { cursor } } })),
  );
  const queryClient = useQueryClient();
  const [adding, { open, close }] = useDisclosure();
  const setRole = useMutation({
    mutationFn: ({ id, role }: { id: string; role: Role }) =>
      unwrap(api.PATCH('/v1/users/{id}', { params: { path: { id } }, body: { role } })),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['users'] }),
  });
  return (
    <>
      <PageTitle actions={<Button onClick={open}>Add person</Button>}>People</PageTitle>
      <PagedList
        query={query}
        count={items.length}
        what="people"
        empty={
          <EmptyState title="Nobody yet">
            People appear when they first sign in, or when you add them before.
          </EmptyState>
        }
      >
        <Table>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>E-mail</Table.Th>
              <Table.Th>Organisation role</Table.Th>
              <Table.Th>Last sign-in</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {items.map((u) => (
              <Table.Tr key={u.id}>
                <Table.Td>{u.name ?? '—'}</Table.Td>
                <Table.Td>{u.email ?? '—'}</Table.Td>
                <Table.Td>
                  <Select
                    aria-label={`Role of ${u.name ?? u.email ?? u.id}`}
                    data={roleOptions}
                    value={u.role}
                    allowDeselect={false}
                    w={140}
                    onChange={(role) => isRole(role) && setRole.mutate({ id: u.id, role })}
                  />
                </Table.Td>
                <Table.Td>{when(u.last_login_at)}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </PagedList>
      <Modal opened={adding} onClose={close} title="Add a person">
        <AddPerson onDone={close} />
      </Modal>
    </>
  );
}

function AddPerson({ onDone }: { onDone: () => void }) {
  const [email, setEmail] = useState('');
  const [name, setName] = useState('');
  const [role, setRole] = useState<Role>('member');
  const queryClient = useQueryClient();
  const add = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/users', { body: { email, name: name || undefined, role } })),
    onSuccess: () => {
      notifications.show({ color: 'green', message: `${email} added: they sign in through the identity provider` });
      void queryClient.invalidateQueries({ queryKey: ['users'] });
      onDone();
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
          label="E-mail"
          type="email"
          required
          value={email}
          onChange={(e) => setEmail(e.currentTarget.value)}
          data-autofocus
        />
        <TextInput label="Name" value={name} onChange={(e) => setName(e.currentTarget.value)} />
        <Select
          label="Organisation role"
          data={roleOptions}
          value={role}
          allowDeselect={false}
          onChange={(r) => isRole(r) && setRole(r)}
        />
        <Button type="submit" loading={add.isPending}>
          Add
        </Button>
      </Stack>
    </form>
  );
}
