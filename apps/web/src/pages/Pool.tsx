import { Badge, Button, Code, Table, Text } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { useParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { Confirm } from '../app/dialogs';
import { usePagedList } from '../app/paging';
import { EmptyState, PagedList, PageTitle } from '../app/ui';

/** To the second: a restart a minute after the start shows. */
function since(date: string): string {
  return new Date(date).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

/**
 * The workspace's remote MCP server instances on the replica that answers:
 * their state, since when, their load, and a restart. The list is read again
 * every few seconds, so a restart shows its successor starting, then running.
 */
export default function Pool() {
  const ws = useParams().ws!;
  const [restarting, setRestarting] = useState<{ id: string; server: string } | null>(null);
  const queryClient = useQueryClient();
  const { query, items } = usePagedList(['pool-instances', ws], (cursor) =>
    unwrap(api.GET('/v1/workspaces/{ws}/pool/instances', { params: { path: { ws }, query: { cursor } } })),
  );
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['pool-instances', ws] });
  const restart = useMutation({
    mutationFn: (id: string) =>
      unwrap(api.POST('/v1/workspaces/{ws}/pool/instances/{id}/restart', { params: { path: { ws, id } } })),
    onMutate: () => setRestarting(null),
    onSuccess: (started) => notifications.show({ color: 'green', message: `${started.server} runs again` }),
    onSettled: refresh,
  });
  // while a restart is under way its successor shows starting; otherwise the list follows the pool every few seconds
  const pending = restart.isPending;
  useEffect(() => {
    const timer = setInterval(
      () => void queryClient.invalidateQueries({ queryKey: ['pool-instances', ws] }),
      pending ? 300 : 5000,
    );
    return () => clearInterval(timer);
  }, [queryClient, ws, pending]);
  return (
    <>
      <PageTitle
        actions={
          <Button variant="default" onClick={refresh}>
            Refresh
          </Button>
        }
      >
        Pool
      </PageTitle>
      <Text size="sm" c="dimmed" mb="md">
        Instances start on first use and stop when idle. This list is the replica&apos;s that answered.
      </Text>
      <PagedList
        query={query}
        count={items.length}
        what="instances"
        empty={
          <EmptyState title="Nothing running">
            An instance starts when an MCP client first uses one of the workspace&apos;s remote servers.
          </EmptyState>
        }
      >
        <Table>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Server</Table.Th>
              <Table.Th>Instance</Table.Th>
              <Table.Th>State</Table.Th>
              <Table.Th>Since</Table.Th>
              <Table.Th ta="right">In flight</Table.Th>
              <Table.Th ta="right">Sessions</Table.Th>
              <Table.Th>Action</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {items.map((i) => (
              <Table.Tr key={i.id} aria-label={`Instance ${i.id}`}>
                <Table.Td>
                  {i.server}
                  <Text size="xs" c="dimmed">
                    version {i.version}
                  </Text>
                </Table.Td>
                <Table.Td>
                  <Code>{i.id}</Code>
                  {i.pid !== undefined && (
                    <Text size="xs" c="dimmed">
                      pid {i.pid}
                    </Text>
                  )}
                </Table.Td>
                <Table.Td>
                  <Badge color={i.state === 'running' ? 'green' : 'yellow'}>{i.state}</Badge>
                </Table.Td>
                <Table.Td>{since(i.started_at)}</Table.Td>
                <Table.Td ta="right">{i.inflight}</Table.Td>
                <Table.Td ta="right">{i.sessions}</Table.Td>
                <Table.Td>
                  {i.state === 'running' && (
                    <Button
                      size="xs"
                      variant="light"
                      aria-label={`Restart ${i.server} (${i.id})`}
                      loading={restart.isPending && restart.variables === i.id}
                      onClick={() => setRestarting({ id: i.id, server: i.server })}
                    >
                      Restart
                    </Button>
                  )}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </PagedList>
      <Confirm
        opened={restarting !== null}
        onClose={() => setRestarting(null)}
        title={`Restart ${restarting?.server}?`}
        action="Restart"
        onConfirm={() => restarting && restart.mutate(restarting.id)}
      >
        Calls in flight on it fail; its MCP sessions carry on at their next request, on the new instance, which starts
        at once with its credentials read anew.
      </Confirm>
    </>
  );
}
