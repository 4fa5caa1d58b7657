import { Anchor, Button, Modal, Select, Stack, Table, TextInput } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { notifications } from '@mantine/notifications';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useNavigate } from 'react-router';
import { api, unwrap } from '../api/client';
import { usePagedList } from '../app/paging';
import { EmptyState, PagedList, PageTitle, when } from '../app/ui';

export default function Workspaces() {
  const { query, items } = usePagedList(['workspaces'], (cursor) =>
    unwrap(api.GET('/v1/workspaces', { params: { query: { cursor } } })),
  );
  const [opened, { open, close }] = useDisclosure();
  return (
    <>
      <PageTitle actions={<Button onClick={open}>New workspace</Button>}>Workspaces</PageTitle>
      <PagedList
        query={query}
        count={items.length}
        what="workspaces"
        empty={
          <EmptyState title="No workspaces yet">
            A workspace holds a team's servers, policy, secrets and audit log.
          </EmptyState>
        }
      >
        <Table striped highlightOnHover>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Slug</Table.Th>
              <Table.Th>Your role</Table.Th>
              <Table.Th>Policy default</Table.Th>
              <Table.Th>Created</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {items.map((ws) => (
              <Table.Tr key={ws.id}>
                <Table.Td>
                  <Anchor component={Link} to={`/workspaces/${ws.slug}`} size="sm">
                    {ws.name}
                  </Anchor>
                </Table.Td>
                <Table.Td>{ws.slug}</Table.Td>
                <Table.Td>{ws.role ?? '—'}</Table.Td>
                <Table.Td>{ws.policy_default}</Table.Td>
                <Table.Td>{when(ws.created_at)}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </PagedList>
      <Modal opened={opened} onClose={close} title="New workspace">
        <CreateWorkspace onDone={close} />
      </Modal>
    </>
  );
}

function CreateWorkspace({ onDone }: { onDone: () => void }) {
  const [name, setName] = useState('');
  const [slug, setSlug] = useState('');
  const [policyDefault, setPolicyDefault] = useState<'allow' | 'deny'>('deny');
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/workspaces', { body: { name, slug, policy_default: policyDefault } })),
    onSuccess: async (ws) => {
      notifications.show({ color: 'green', message: `Workspace ${ws.slug} created` });
      await Promise.all([
        queryClient.invalidateQueries({ queryKey: ['workspaces'] }),
        queryClient.invalidateQueries({ queryKey: ['me'] }),
      ]);
      onDone();
      void navigate(`/workspaces/${ws.slug}`);
    },
  });
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        create.mutate();
      }}
    >
      <Stack>
        <TextInput
          label="Name"
          value={name}
          required
          data-autofocus
          onChange={(e) => {
            const value = e.currentTarget.value;
            setName(value);
            setSlug(
              value
                .toLowerCase()
                .replace(/[^a-z0-9]+/g, '-')
                .replace(/^-+|-+$/g, '')
                .slice(0, 63),
            );
          }}
        />
        <TextInput
          label="Slug"
          description="Lowercase letters, digits and dashes; it never changes"
          value={slug}
          required
          onChange={(e) => setSlug(e.currentTarget.value)}
        />
        <Select
          label="When no rule matches"
          data={[
            { value: 'deny', label: 'Deny the call' },
            { value: 'allow', label: 'Allow the call' },
          ]}
          value={policyDefault}
          allowDeselect={false}
          onChange={(v) => setPolicyDefault(v === 'allow' ? 'allow' : 'deny')}
        />
        <Button type="submit" loading={create.isPending}>
          Create
        </Button>
      </Stack>
    </form>
  );
}
