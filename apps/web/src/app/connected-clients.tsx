import { Badge, Button, Code, Table, Text, VisuallyHidden } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type ReactNode, useState } from 'react';
import type { operations } from '../api/schema.gen';
import { Confirm } from './dialogs';
import { type ListPage, usePagedList } from './paging';
import { PagedList, when } from './ui';

/** One connected client: a person's consent to an MCP client for one workspace's MCP endpoint. */
export type ConnectedClient =
  operations['getV1MeOauthClients']['responses'][200]['content']['application/json']['items'][number];

const nameOf = (c: ConnectedClient) => c.client_name ?? c.client_id;
const personOf = (c: ConnectedClient) => c.user.name ?? c.user.email ?? c.user.id;

/**
 * The connected clients of a workspace (with who connected each) or of the
 * signed-in person (with the workspace of each), read page by page, each
 * disconnected behind a confirmation. A client's name is its own claim, so
 * its id (for a metadata document, the address it was fetched from) is
 * always shown beside it.
 */
export function ConnectedClients({
  queryKey,
  fetchPage,
  disconnect,
  whose,
  canDisconnect,
  empty,
}: {
  queryKey: readonly unknown[];
  fetchPage: (cursor: string | undefined) => Promise<ListPage<ConnectedClient>>;
  disconnect: (id: string) => Promise<unknown>;
  /** a workspace's list names the person of each; a person's own names the workspace */
  whose: 'workspace' | 'person';
  canDisconnect: boolean;
  empty: ReactNode;
}) {
  const { query, items } = usePagedList(queryKey, fetchPage);
  const queryClient = useQueryClient();
  const [disconnecting, setDisconnecting] = useState<ConnectedClient | null>(null);
  const remove = useMutation({
    mutationFn: (id: string) => disconnect(id),
    onSuccess: () => {
      setDisconnecting(null);
      void queryClient.invalidateQueries({ queryKey });
    },
  });
  return (
    <>
      <PagedList query={query} count={items.length} what="connected clients" empty={empty}>
        <Table aria-label="Connected clients">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Client</Table.Th>
              <Table.Th>{whose === 'workspace' ? 'Person' : 'Workspace'}</Table.Th>
              <Table.Th>Connected</Table.Th>
              <Table.Th>Last used</Table.Th>
              <Table.Th>Resource</Table.Th>
              {canDisconnect && (
                <Table.Th>
                  <VisuallyHidden>Actions</VisuallyHidden>
                </Table.Th>
              )}
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {items.map((c) => (
              <Table.Tr key={c.id}>
                <Table.Td>
                  <Text size="sm" fw={500}>
                    {nameOf(c)}
                    {c.registration === 'dynamic' && (
                      <Badge ml="xs" size="xs" variant="light" color="gray">
                        self-registered
                      </Badge>
                    )}
                  </Text>
                  <Text size="xs" c="dimmed" style={{ wordBreak: 'break-all' }}>
                    {c.client_id}
                  </Text>
                </Table.Td>
                <Table.Td>
                  {whose === 'workspace' ? (
                    <>
                      {personOf(c)}
                      {c.user.email && c.user.name && (
                        <Text size="xs" c="dimmed">
                          {c.user.email}
                        </Text>
                      )}
                    </>
                  ) : (
                    c.workspace
                  )}
                </Table.Td>
                <Table.Td>{when(c.connected_at)}</Table.Td>
                <Table.Td>{c.last_used_at ? when(c.last_used_at) : 'never'}</Table.Td>
                <Table.Td>
                  <Code>{c.resource}</Code>
                </Table.Td>
                {canDisconnect && (
                  <Table.Td>
                    <Button
                      variant="subtle"
                      color="red"
                      size="xs"
                      aria-label={`Disconnect ${nameOf(c)}`}
                      onClick={() => setDisconnecting(c)}
                    >
                      Disconnect
                    </Button>
                  </Table.Td>
                )}
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </PagedList>
      <Confirm
        opened={disconnecting !== null}
        onClose={() => setDisconnecting(null)}
        title="Disconnect client"
        action="Disconnect"
        color="red"
        loading={remove.isPending}
        onConfirm={() => disconnecting && remove.mutate(disconnecting.id)}
      >
        Disconnect “{disconnecting && nameOf(disconnecting)}”
        {whose === 'workspace' ? ` of ${disconnecting ? personOf(disconnecting) : ''}` : ''}? Its access and refresh
        tokens stop working on every replica at once; to connect again it must ask{' '}
        {whose === 'workspace' ? 'that person' : 'you'} to allow it once more.
      </Confirm>
    </>
  );
}
