import { Anchor, Badge, SegmentedControl, Table, Text } from '@mantine/core';
import { useState } from 'react';
import { Link, useParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { usePagedList } from '../app/paging';
import { EmptyState, PagedList, PageTitle, when } from '../app/ui';

export const SESSION_STATE_COLOR: Record<string, string> = { live: 'green', ended: 'gray', expired: 'gray' };

/** The workspace's agent sessions, newest first: the live ones, or all of them. */
export default function Sessions() {
  const ws = useParams().ws!;
  const [live, setLive] = useState<'true' | 'false'>('true');
  const { query, items } = usePagedList(['sessions', ws, live], (cursor) =>
    unwrap(api.GET('/v1/workspaces/{ws}/sessions', { params: { path: { ws }, query: { live, cursor } } })),
  );
  return (
    <>
      <PageTitle>Agent sessions</PageTitle>
      <SegmentedControl
        mb="md"
        aria-label="Which sessions"
        value={live}
        onChange={(v) => setLive(v === 'false' ? 'false' : 'true')}
        data={[
          { value: 'true', label: 'Live' },
          { value: 'false', label: 'All' },
        ]}
      />
      <PagedList
        query={query}
        count={items.length}
        what="sessions"
        empty={
          <EmptyState title={live === 'true' ? 'No live session' : 'No session'}>
            An agent gets a session (and its caveat token) from a member, an API token or a gateway.
          </EmptyState>
        }
      >
        <Table>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Session</Table.Th>
              <Table.Th>Agent</Table.Th>
              <Table.Th>Acts for</Table.Th>
              <Table.Th>State</Table.Th>
              <Table.Th>Started</Table.Th>
              <Table.Th>Expires</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {items.map((s) => (
              <Table.Tr key={s.id}>
                <Table.Td>
                  <Anchor component={Link} to={`/workspaces/${ws}/sessions/${s.id}`}>
                    {s.name ?? s.id.slice(0, 8)}
                  </Anchor>
                </Table.Td>
                <Table.Td>{s.agent ?? '—'}</Table.Td>
                <Table.Td>
                  <Text size="sm" ff="monospace">
                    {s.created_by}
                  </Text>
                </Table.Td>
                <Table.Td>
                  <Badge color={SESSION_STATE_COLOR[s.state]}>{s.state}</Badge>
                </Table.Td>
                <Table.Td>{when(s.created_at)}</Table.Td>
                <Table.Td>{when(s.expires_at)}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </PagedList>
    </>
  );
}
