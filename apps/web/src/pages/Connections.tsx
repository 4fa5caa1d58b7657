import { Badge, Button, Table, Text, VisuallyHidden } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useParams } from 'react-router';
import { api, unwrap } from '../api/client';
import type { operations } from '../api/schema.gen';
import { Confirm } from '../app/dialogs';
import { usePagedList } from '../app/paging';
import { useMe } from '../app/session';
import { EmptyState, PagedList, PageTitle, when } from '../app/ui';
import { isAdmin } from './roles';

type Connection =
  operations['getV1WorkspacesWsConnections']['responses'][200]['content']['application/json']['items'][number];

const STATE_COLOR = { connected: 'green', expired: 'yellow', needs_reconnect: 'red' } as const;
const STATE_TEXT = { connected: 'connected', expired: 'expired', needs_reconnect: 'needs reconnect' } as const;

/**
 * The workspace's remote servers that sign in with OAuth, and the connections
 * the pool calls them on: a person's own (per_person) or the workspace's
 * (per_workspace). Connect sends the browser to the upstream's sign-in; the
 * tokens it brings back go to the vault and are never shown. Disconnecting
 * revokes them upstream where the server can.
 */
export default function Connections() {
  const ws = useParams().ws!;
  const me = useMe();
  const role = me.data?.workspaces.find((w) => w.slug === ws)?.role ?? null;
  // a person signed in to the console is a user principal; an API token in a browser has no connections of its own
  const myId = me.data?.principal.kind === 'user' ? me.data.principal.id : undefined;
  const queryClient = useQueryClient();
  const [ending, setEnding] = useState<Connection | null>(null);
  // a workspace has a handful of servers: the first page holds them
  const servers = useQuery({
    queryKey: ['workspace-servers', ws],
    queryFn: () => unwrap(api.GET('/v1/workspaces/{ws}/servers', { params: { path: { ws }, query: { limit: 200 } } })),
  });
  const { query, items } = usePagedList(['connections', ws], (cursor) =>
    unwrap(api.GET('/v1/workspaces/{ws}/connections', { params: { path: { ws }, query: { cursor } } })),
  );
  const connect = useMutation({
    mutationFn: (server: string) =>
      unwrap(api.POST('/v1/workspaces/{ws}/connections', { params: { path: { ws } }, body: { server } })),
    // on to the upstream's sign-in; its callback page says how it went
    onSuccess: (started) => window.location.assign(started.authorization_url),
  });
  const end = useMutation({
    mutationFn: (id: string) =>
      unwrap(api.DELETE('/v1/workspaces/{ws}/connections/{id}', { params: { path: { ws, id } } })),
    onSuccess: () => {
      setEnding(null);
      void queryClient.invalidateQueries({ queryKey: ['connections', ws] });
    },
  });
  const oauthServers = (servers.data?.items ?? []).filter((s) => s.auth === 'oauth');
  /** the connection a call of mine to `server` would use */
  const mine = (server: string, mode: string | null) =>
    items.find(
      (c) =>
        c.server === server && (mode === 'per_workspace' ? c.user === null : myId !== undefined && c.user?.id === myId),
    );
  const mayEnd = (c: Connection) => isAdmin(role) || (c.user !== null && c.user.id === myId);
  return (
    <>
      <PageTitle>Connections</PageTitle>
      <Text size="sm" c="dimmed" mb="md">
        Remote servers that sign in with OAuth are called on a connection: your own, or the workspace&apos;s, which an
        owner or admin makes. Its tokens are kept in the vault and never shown.
      </Text>
      {oauthServers.length === 0 ? (
        <EmptyState title="No server signs in with OAuth">
          A catalog entry with <code>auth: oauth</code> assigned to this workspace shows here.
        </EmptyState>
      ) : (
        <Table aria-label="Servers that sign in with OAuth" mb="xl">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Server</Table.Th>
              <Table.Th>Connection</Table.Th>
              <Table.Th>State</Table.Th>
              <Table.Th>
                <VisuallyHidden>Actions</VisuallyHidden>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {oauthServers.map((s) => {
              const current = mine(s.server, s.connections);
              const canConnect = s.connections !== 'per_workspace' || isAdmin(role);
              return (
                <Table.Tr key={s.server}>
                  <Table.Td>{s.server}</Table.Td>
                  <Table.Td>{s.connections === 'per_workspace' ? "the workspace's" : 'your own'}</Table.Td>
                  <Table.Td>
                    {current ? (
                      <Badge color={STATE_COLOR[current.state]}>{STATE_TEXT[current.state]}</Badge>
                    ) : (
                      <Text size="sm">not connected</Text>
                    )}
                  </Table.Td>
                  <Table.Td>
                    {canConnect && (
                      <Button
                        size="xs"
                        variant={current?.state === 'connected' ? 'default' : 'filled'}
                        aria-label={`${current ? 'Reconnect' : 'Connect'} ${s.server}`}
                        loading={connect.isPending && connect.variables === s.server}
                        onClick={() => connect.mutate(s.server)}
                      >
                        {current ? 'Reconnect' : 'Connect'}
                      </Button>
                    )}
                  </Table.Td>
                </Table.Tr>
              );
            })}
          </Table.Tbody>
        </Table>
      )}
      <PagedList
        query={query}
        count={items.length}
        what="connections"
        empty={<Text size="sm">Nobody has connected a server yet.</Text>}
      >
        <Table aria-label="Connections">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Server</Table.Th>
              <Table.Th>Whose</Table.Th>
              <Table.Th>State</Table.Th>
              <Table.Th>Connected</Table.Th>
              <Table.Th>Last used</Table.Th>
              <Table.Th>Access until</Table.Th>
              <Table.Th>
                <VisuallyHidden>Actions</VisuallyHidden>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {items.map((c) => (
              <Table.Tr key={c.id}>
                <Table.Td>{c.server}</Table.Td>
                <Table.Td>{c.user === null ? 'the workspace' : (c.user.name ?? c.user.email ?? c.user.id)}</Table.Td>
                <Table.Td>
                  <Badge color={STATE_COLOR[c.state]}>{STATE_TEXT[c.state]}</Badge>
                  {c.problem && (
                    <Text size="xs" c="dimmed">
                      {c.problem}
                    </Text>
                  )}
                </Table.Td>
                <Table.Td>{when(c.connected_at)}</Table.Td>
                <Table.Td>{when(c.last_used_at)}</Table.Td>
                <Table.Td>{when(c.access_expires_at)}</Table.Td>
                <Table.Td>
                  {mayEnd(c) && (
                    <Button
                      size="xs"
                      variant="light"
                      color="red"
                      aria-label={`Disconnect ${c.server} (${c.user === null ? 'the workspace' : (c.user.email ?? c.user.id)})`}
                      onClick={() => setEnding(c)}
                    >
                      Disconnect
                    </Button>
                  )}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </PagedList>
      <Confirm
        opened={ending !== null}
        onClose={() => setEnding(null)}
        title={`Disconnect ${ending?.server}?`}
        action="Disconnect"
        onConfirm={() => ending && end.mutate(ending.id)}
      >
        Its tokens are revoked at the server where it allows that, and deleted here. Calls that used it are refused
        until someone connects again.
      </Confirm>
    </>
  );
}
