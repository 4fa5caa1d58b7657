import { Badge, Grid, SegmentedControl, Table, Text, UnstyledButton } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { useWorkspaceEvents } from '../app/events';
import { usePagedList } from '../app/paging';
import { EmptyState, PagedList, PageTitle, when } from '../app/ui';
import { ApprovalView, decideThroughApi } from './approval-view';

type Status = 'pending' | 'approved' | 'denied' | 'expired' | 'cancelled';

/** A request arrives or is decided: the inbox reads its list again. */
const APPROVAL_EVENTS = [
  'approval.requested',
  'approval.approved',
  'approval.denied',
  'approval.expired',
  'approval.cancelled',
];

/**
 * The approval inbox, live: the workspace's event stream (SSE) says when a
 * request arrives or is decided, and the list is read again. Each request
 * shows the exact call as the API shows it (arguments redacted by the API),
 * the rules that held it and its route.
 */
export default function Approvals() {
  const ws = useParams().ws!;
  const [status, setStatus] = useState<Status>('pending');
  const queryClient = useQueryClient();
  const { query, items } = usePagedList(['approvals', ws, status], (cursor) =>
    unwrap(api.GET('/v1/workspaces/{ws}/approvals', { params: { path: { ws }, query: { status, cursor } } })),
  );
  const [selected, setSelected] = useState<string | null>(null);
  const live = useWorkspaceEvents(
    ws,
    APPROVAL_EVENTS,
    () => void queryClient.invalidateQueries({ queryKey: ['approvals', ws] }),
  );
  const current = items.find((a) => a.id === selected) ?? null;
  return (
    <>
      <PageTitle actions={<Badge color={live ? 'green' : 'gray'}>{live ? 'live' : 'connecting'}</Badge>}>
        Approvals
      </PageTitle>
      <SegmentedControl
        mb="md"
        aria-label="Which requests"
        value={status}
        onChange={(v) => setStatus(v as Status)}
        data={[
          { value: 'pending', label: 'Waiting' },
          { value: 'approved', label: 'Approved' },
          { value: 'denied', label: 'Denied' },
          { value: 'expired', label: 'Expired' },
        ]}
      />
      <Grid>
        <Grid.Col span={{ base: 12, md: 5 }}>
          <PagedList
            query={query}
            count={items.length}
            what="approvals"
            empty={
              <EmptyState title={status === 'pending' ? 'Nothing waiting' : `No ${status} requests`}>
                {status === 'pending'
                  ? 'Requests appear here as soon as a policy rule holds a call.'
                  : 'Decided requests stay here as history.'}
              </EmptyState>
            }
          >
            <Table highlightOnHover>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Call</Table.Th>
                  <Table.Th>Asked</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {items.map((a) => (
                  <Table.Tr key={a.id} bg={a.id === selected ? 'var(--mantine-color-blue-light)' : undefined}>
                    <Table.Td>
                      <UnstyledButton onClick={() => setSelected(a.id)} aria-pressed={a.id === selected}>
                        {a.server} → {a.tool}
                      </UnstyledButton>
                      {/* two calls of the same tool are told apart by who asked */}
                      <Text size="xs" c="dimmed">
                        {a.requester}
                      </Text>
                    </Table.Td>
                    <Table.Td>{when(a.created_at)}</Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </PagedList>
        </Grid.Col>
        <Grid.Col span={{ base: 12, md: 7 }}>
          {current ? (
            <ApprovalView
              key={current.id}
              approval={current}
              decide={(decision, reason) => decideThroughApi(current.id, decision, reason)}
              onDecided={() => void queryClient.invalidateQueries({ queryKey: ['approvals', ws] })}
            />
          ) : (
            <EmptyState title="Pick a request">Its exact call, the rule that held it, and the decision.</EmptyState>
          )}
        </Grid.Col>
      </Grid>
    </>
  );
}
