import { Badge, Button, Card, Code, Group, Stack, Text, Textarea, Title } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api/client';
import type { operations } from '../api/schema.gen';
import { when } from '../app/ui';

/** One approval request as the API shows it: the arguments already redacted by the API. */
export type Approval = operations['getV1ApprovalsId']['responses'][200]['content']['application/json'];
export type Decision = 'approve' | 'deny';

/**
 * A decision through the API, as the signed-in person (the browser session)
 * or with a bearer token; recorded as made on a page, as the review page's were.
 */
export function decideThroughApi(
  id: string,
  decision: Decision,
  reason: string,
  headers: Record<string, string> = {},
): Promise<Approval> {
  const request = {
    params: { path: { id } },
    body: { channel: 'page' as const, ...(reason ? { reason } : {}) },
    headers,
  };
  return unwrap(
    decision === 'approve'
      ? api.POST('/v1/approvals/{id}/approve', request)
      : api.POST('/v1/approvals/{id}/deny', request),
  );
}

/**
 * One request: the exact call, the rules and the route that held it, who
 * asked, the votes so far, and (while it waits) approve or deny with a
 * reason. The inbox shows it beside its list; a review link opens it alone
 * (pages/Approval.tsx). `decide` says how this reader decides.
 */
export function ApprovalView({
  approval: a,
  decide,
  onDecided,
}: {
  approval: Approval;
  decide: (decision: Decision, reason: string) => Promise<Approval>;
  onDecided: (answer: Approval) => void;
}) {
  const [reason, setReason] = useState('');
  const decision = useMutation({
    mutationFn: (choice: Decision) => decide(choice, reason),
    onSuccess: (answer) => {
      notifications.show({
        color: 'green',
        message: `Request ${answer.status === 'pending' ? 'answered; waiting for more approvers' : answer.status}`,
      });
      onDecided(answer);
    },
  });
  return (
    <Card withBorder component="section" aria-labelledby="approval-title">
      <Stack>
        <Group justify="space-between">
          <Title order={2} size="h4" id="approval-title">
            {a.server} → {a.tool}
          </Title>
          <Badge aria-label={`Status: ${a.status}${a.consumed_at ? ', used' : ''}`}>
            {a.status}
            {a.consumed_at ? ' · used' : ''}
          </Badge>
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
        {a.session && (
          <Text size="sm">
            Agent session <Code>{a.session}</Code>
          </Text>
        )}
        <div>
          <Text size="sm" fw={600}>
            Arguments
          </Text>
          <Code block aria-label="Arguments">
            {JSON.stringify(a.arguments, null, 2)}
          </Code>
        </div>
        {a.decisions.length > 0 && (
          <Stack gap={4} aria-label="Decisions">
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
                loading={decision.isPending && decision.variables === 'approve'}
                onClick={() => decision.mutate('approve')}
              >
                Approve
              </Button>
              <Button
                color="red"
                variant="light"
                loading={decision.isPending && decision.variables === 'deny'}
                onClick={() => decision.mutate('deny')}
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
