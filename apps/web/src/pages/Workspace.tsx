import { Anchor, Button, Group, Modal, Select, Stack, Table, Text, VisuallyHidden } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { notifications } from '@mantine/notifications';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { usePagedList } from '../app/paging';
import { EmptyState, ErrorState, PagedList, PageTitle, when } from '../app/ui';
import { isRole, type Role, roleOptions } from './roles';

/** One workspace: its members and their roles. */
export default function Workspace() {
  const ws = useParams().ws!;
  const workspace = useQuery({
    queryKey: ['workspace', ws],
    queryFn: () => unwrap(api.GET('/v1/workspaces/{ws}', { params: { path: { ws } } })),
  });
  const { query, items } = usePagedList(['members', ws], (cursor) =>
    unwrap(api.GET('/v1/workspaces/{ws}/members', { params: { path: { ws }, query: { cursor } } })),
  );
  const queryClient = useQueryClient();
  const [adding, { open, close }] = useDisclosure();
  const [removing, setRemoving] = useState<{ id: string; name: string } | null>(null);
  const refresh = () => queryClient.invalidateQueries({ queryKey: ['members', ws] });
  const setRole = useMutation({
    mutationFn: ({ userId, role }: { userId: string; role: Role }) =>
      unwrap(
        api.PUT('/v1/workspaces/{ws}/members/{user_id}', { params: { path: { ws, user_id: userId } }, body: { role } }),
      ),
    onSuccess: () => refresh(),
  });
  const remove = useMutation({
    mutationFn: (userId: string) =>
      unwrap(api.DELETE('/v1/workspaces/{ws}/members/{user_id}', { params: { path: { ws, user_id: userId } } })),
    onSuccess: () => {
      setRemoving(null);
      void refresh();
    },
  });
  if (workspace.error) return <ErrorState error={workspace.error} />;
  return (
    <>
      <PageTitle actions={<Button onClick={open}>Add member</Button>}>{workspace.data?.name ?? ws}</PageTitle>
      <Group mb="md">
        <Anchor component={Link} to={`/workspaces/${ws}/policy`}>
          Policy
        </Anchor>
        <Anchor component={Link} to={`/workspaces/${ws}/approvals`}>
          Approvals
        </Anchor>
      </Group>
      <Text fw={600} mb="xs" component="h2">
        Members
      </Text>
      <PagedList
        query={query}
        count={items.length}
        what="members"
        empty={
          <EmptyState title="No members">
            Organisation owners, admins and auditors reach every workspace without being members.
          </EmptyState>
        }
      >
        <Table>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Person</Table.Th>
              <Table.Th>Role</Table.Th>
              <Table.Th>Member since</Table.Th>
              <Table.Th>
                <VisuallyHidden>Actions</VisuallyHidden>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {items.map((m) => {
              const name = m.name ?? m.email ?? m.user_id;
              return (
                <Table.Tr key={m.user_id}>
                  <Table.Td>{name}</Table.Td>
                  <Table.Td>
                    <Select
                      aria-label={`Role of ${name}`}
                      data={roleOptions}
                      value={m.role}
                      allowDeselect={false}
                      w={140}
                      onChange={(role) => isRole(role) && setRole.mutate({ userId: m.user_id, role })}
                    />
                  </Table.Td>
                  <Table.Td>{when(m.created_at)}</Table.Td>
                  <Table.Td>
                    <Button variant="subtle" color="red" size="xs" onClick={() => setRemoving({ id: m.user_id, name })}>
                      Remove
                    </Button>
                  </Table.Td>
                </Table.Tr>
              );
            })}
          </Table.Tbody>
        </Table>
      </PagedList>
      <Modal opened={adding} onClose={close} title="Add a member">
        <AddMember ws={ws} onDone={close} />
      </Modal>
      <Modal opened={removing !== null} onClose={() => setRemoving(null)} title="Remove member">
        <Stack>
          <Text>Remove {removing?.name} from this workspace?</Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setRemoving(null)}>
              Cancel
            </Button>
            <Button color="red" loading={remove.isPending} onClick={() => removing && remove.mutate(removing.id)}>
              Remove
            </Button>
          </Group>
        </Stack>
      </Modal>
    </>
  );
}

function AddMember({ ws, onDone }: { ws: string; onDone: () => void }) {
  const { items: users } = usePagedList(['users'], (cursor) =>
    unwrap(api.GET('/v1/users', { params: { query: { cursor } } })),
  );
  const [userId, setUserId] = useState<string | null>(null);
  const [role, setRole] = useState<Role>('member');
  const queryClient = useQueryClient();
  const add = useMutation({
    mutationFn: () =>
      unwrap(
        api.PUT('/v1/workspaces/{ws}/members/{user_id}', {
          params: { path: { ws, user_id: userId! } },
          body: { role },
        }),
      ),
    onSuccess: () => {
      notifications.show({ color: 'green', message: 'Member added' });
      void queryClient.invalidateQueries({ queryKey: ['members', ws] });
      onDone();
    },
  });
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        if (userId) add.mutate();
      }}
    >
      <Stack>
        <Select
          label="Person"
          searchable
          required
          data={users.map((u) => ({ value: u.id, label: u.name ?? u.email ?? u.id }))}
          value={userId}
          onChange={setUserId}
          nothingFoundMessage="Add people on the People page first"
        />
        <Select
          label="Role"
          data={roleOptions}
          value={role}
          allowDeselect={false}
          onChange={(r) => isRole(r) && setRole(r)}
        />
        <Button type="submit" loading={add.isPending} disabled={!userId}>
          Add
        </Button>
      </Stack>
    </form>
  );
}
