import {
  Badge,
  Button,
  Card,
  Code,
  Grid,
  Group,
  SegmentedControl,
  Stack,
  Table,
  Text,
  Textarea,
  Title,
  UnstyledButton,
} from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { useWorkspaceEvents } from '../app/events';
import { usePagedList } from '../app/paging';
import { EmptyState, PagedList, PageTitle, when } from '../app/ui';

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
            <ApprovalView approval={current} ws={ws} />
          ) : (
            <EmptyState title="Pick a request">Its exact call, the rule that held it, and the decision.</EmptyState>
          )}
        </Grid.Col>
      </Grid>
    </>
  );
}

interface Approval {
  id: string;
  status: Status;
  server: string;
  tool: string;
  arguments: Record<string, unknown>;
  requester: string;
  requested_by: string;
  execution_mode: string;
  rules: string[];
  route: string;
  quorum: number;
  expires_at: string;
  decisions: { approver: string; decision: 'approve' | 'deny'; reason: string | null; at: string }[];
  reason: string | null;
}

function ApprovalView({ approval: a, ws }: { approval: Approval; ws: string }) {
  const [reason, setReason] = useState('');
  const queryClient = useQueryClient();
  const decide = useMutation({
    mutationFn: (decision: 'approve' | 'deny') =>
      unwrap(
        decision === 'approve'
          ? api.POST('/v1/approvals/{id}/approve', {
              params: { path: { id: a.id } },
              body: { ...(reason ? { reason } : {}) },
            })
          : api.POST('/v1/approvals/{id}/deny', {
              params: { path: { id: a.id } },
              body: { ...(reason ? { reason } : {}) },
            }),
      ),
    onSuccess: (answer) => {
      notifications.show({
        color: 'green',
        message: `Request ${answer.status === 'pending' ? 'answered; waiting for more approvers' : answer.status}`,
      });
      void queryClient.invalidateQueries({ queryKey: ['approvals', ws] });
    },
  });
  return (
    <Card withBorder component="section" aria-labelledby="approval-title">
      <Stack>
        <Group justify="space-between">
          <Title order={2} size="h4" id="approval-title">
            {a.server} → {a.tool}
          </Title>
          <Badge>{a.status}</Badge>
        </Group>
        <Text size="sm">
          Held by rule{' '}
          {a.rules.map((r) => (
            <Code key={r}>{r}</Code>
          ))}{' '}
          on route <Code>{a.route}</Code> ({a.quorum} approval{a.quorum === 1 ? '' : 's'} needed)
        </Text>
        <Text size="sm">
          Asked by {a.requester}
          {a.requested_by !== a.requester ? ` via ${a.requested_by}` : ''} ({a.execution_mode}); expires{' '}
          {when(a.expires_at)}
        </Text>
        <div>
          <Text size="sm" fw={600}>
            Arguments
          </Text>
          <Code block aria-label="Arguments">
            {JSON.stringify(a.arguments, null, 2)}
          </Code>
        </div>
        {a.decisions.length > 0 && (
          <Stack gap={4}>
            <Text size="sm" fw={600}>
              Decisions
            </Text>
            {a.decisions.map((d) => (
              <Text size="sm" key={d.approver + d.at}>
                {d.approver}: {d.decision} {d.reason ? `(“${d.reason}”)` : ''} {when(d.at)}
              </Text>
            ))}
          </Stack>
        )}
        {a.status === 'pending' && (
          <>
            <Textarea
              label="Reason"
              description="Recorded with the decision"
              value={reason}
              onChange={(e) => setReason(e.currentTarget.value)}
            />
            <Group>
              <Button
                color="green"
                loading={decide.isPending && decide.variables === 'approve'}
                onClick={() => decide.mutate('approve')}
              >
                Approve
              </Button>
              <Button
                color="red"
                variant="light"
                loading={decide.isPending && decide.variables === 'deny'}
                onClick={() => decide.mutate('deny')}
              >
                Deny
              </Button>
            </Group>
          </>
        )}
      </Stack>
    </Card>
  );
}
