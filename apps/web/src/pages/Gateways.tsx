import { Badge, Button, Code, Group, Modal, Select, Stack, Table, TagsInput, Text } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { Confirm, Revocable, ShownOnce } from '../app/dialogs';
import { usePagedList } from '../app/paging';
import { EmptyState, PagedList, PageTitle, when } from '../app/ui';

const LIFETIMES = [
  { value: '900', label: '15 minutes' },
  { value: '3600', label: '1 hour' },
  { value: '86400', label: '1 day' },
  { value: '604800', label: '7 days' },
];

/** The workspace's local gateways: enrolment codes (each shown once), the gateways and when each was last seen. */
export default function Gateways() {
  const ws = useParams().ws!;
  const { query, items } = usePagedList(['gateways', ws], (cursor) =>
    unwrap(api.GET('/v1/workspaces/{ws}/gateways', { params: { path: { ws }, query: { cursor } } })),
  );
  const [enrolling, { open, close }] = useDisclosure();
  const [revoking, setRevoking] = useState<{ id: string; name: string } | null>(null);
  const queryClient = useQueryClient();
  const revoke = useMutation({
    mutationFn: (id: string) =>
      unwrap(api.DELETE('/v1/workspaces/{ws}/gateways/{id}', { params: { path: { ws, id } } })),
    onSuccess: () => {
      setRevoking(null);
      void queryClient.invalidateQueries({ queryKey: ['gateways', ws] });
    },
  });
  return (
    <>
      <PageTitle actions={<Button onClick={open}>New enrolment code</Button>}>Gateways</PageTitle>
      <PagedList
        query={query}
        count={items.length}
        what="gateways"
        empty={
          <EmptyState title="No gateway enrolled">
            A gateway on a developer&apos;s machine enrols with a one-time code made here.
          </EmptyState>
        }
      >
        <Table>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Groups</Table.Th>
              <Table.Th>Token</Table.Th>
              <Table.Th>Enrolled</Table.Th>
              <Table.Th>Last contact</Table.Th>
              <Table.Th>State</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {items.map((g) => (
              <Table.Tr key={g.id}>
                <Table.Td>{g.name}</Table.Td>
                <Table.Td>
                  <Group gap={4}>
                    {g.groups.length === 0
                      ? '—'
                      : g.groups.map((group) => (
                          <Badge key={group} variant="light">
                            {group}
                          </Badge>
                        ))}
                  </Group>
                </Table.Td>
                <Table.Td>
                  <Code>{g.prefix}…</Code>
                </Table.Td>
                <Table.Td>{when(g.enrolled_at)}</Table.Td>
                <Table.Td>{g.last_seen_at ? when(g.last_seen_at) : 'never'}</Table.Td>
                <Table.Td>
                  <Revocable
                    revoked={g.revoked_at !== null}
                    name={g.name}
                    onRevoke={() => setRevoking({ id: g.id, name: g.name })}
                  />
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </PagedList>
      <Modal opened={enrolling} onClose={close} title="New enrolment code">
        <EnrolmentCode ws={ws} onDone={close} />
      </Modal>
      <Confirm
        opened={revoking !== null}
        onClose={() => setRevoking(null)}
        title="Revoke gateway"
        action="Revoke"
        color="red"
        loading={revoke.isPending}
        onConfirm={() => revoking && revoke.mutate(revoking.id)}
      >
        Revoke “{revoking?.name}”? Its token is refused on every replica at once.
      </Confirm>
    </>
  );
}

function EnrolmentCode({ ws, onDone }: { ws: string; onDone: () => void }) {
  const [lifetime, setLifetime] = useState('3600');
  const [groups, setGroups] = useState<string[]>([]);
  const create = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/v1/workspaces/{ws}/enrollment-codes', {
          params: { path: { ws } },
          body: { expires_in_seconds: Number(lifetime), groups },
        }),
      ),
  });
  if (create.data) {
    return (
      <ShownOnce
        what="code"
        value={create.data.code}
        note={`It enrols one gateway, until ${when(create.data.expires_at)}.`}
        onDone={onDone}
      >
        <Text size="sm">
          The gateway exchanges it with <Code>POST /v1/gateway/enroll</Code>{' '}
          <Code>{'{"enrollment_code": "…", "name": "…"}'}</Code> for its own token.
        </Text>
      </ShownOnce>
    );
  }
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        create.mutate();
      }}
    >
      <Stack>
        <Select
          label="Valid for"
          data={LIFETIMES}
          value={lifetime}
          allowDeselect={false}
          onChange={(v) => v && setLifetime(v)}
          data-autofocus
        />
        <TagsInput
          label="Rollout groups"
          description="The enrolled gateway joins these (a staged rollout picks its versions by group)"
          value={groups}
          onChange={setGroups}
        />
        <Button type="submit" loading={create.isPending}>
          Make code
        </Button>
      </Stack>
    </form>
  );
}
