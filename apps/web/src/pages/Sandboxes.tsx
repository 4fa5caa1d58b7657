import {
  Alert,
  Anchor,
  Badge,
  Button,
  Card,
  Code,
  Group,
  Select,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { usePagedList } from '../app/paging';
import { EmptyState, ErrorState, Loading, PagedList, PageTitle, when } from '../app/ui';

const DECISION_COLOR: Record<string, string> = { allow: 'green', prompt: 'yellow', forbidden: 'red' };

/** A rule as a person would write the command it names: `git push [--force|-f]`. */
export function ruleText(rule: { program: string; args: (string | string[])[] }): string {
  return [rule.program, ...rule.args.map((a) => (typeof a === 'string' ? a : `[${a.join('|')}]`))].join(' ');
}

/** The workspace's sandboxes, its shell rules, and what the rules would decide of a command line. */
export default function Sandboxes() {
  const ws = useParams().ws!;
  const { query, items } = usePagedList(['sandboxes', ws], (cursor) =>
    unwrap(api.GET('/v1/workspaces/{ws}/sandboxes', { params: { path: { ws }, query: { cursor } } })),
  );
  return (
    <>
      <PageTitle>Sandboxes</PageTitle>
      <Stack>
        <PagedList
          query={query}
          count={items.length}
          what="sandboxes"
          empty={
            <EmptyState title="No sandboxes">
              Agents work in sandboxes made with <Code>POST /v1/workspaces/{ws}/sandboxes</Code>; each change they make
              is a snapshot you can review here.
            </EmptyState>
          }
        >
          <Table>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Name</Table.Th>
                <Table.Th>Network</Table.Th>
                <Table.Th>Source</Table.Th>
                <Table.Th>Made by</Table.Th>
                <Table.Th>Last used</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {items.map((s) => (
                <Table.Tr key={s.name}>
                  <Table.Td>
                    <Anchor component={Link} to={`/workspaces/${ws}/sandboxes/${s.name}`}>
                      {s.name}
                    </Anchor>
                  </Table.Td>
                  <Table.Td>{s.network}</Table.Td>
                  <Table.Td>{s.source}</Table.Td>
                  <Table.Td>
                    {s.created_by}
                    <Text size="xs" c="dimmed">
                      {when(s.created_at)}
                    </Text>
                  </Table.Td>
                  <Table.Td>{when(s.last_used_at)}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </PagedList>
        <ShellRules ws={ws} />
        <CheckLine ws={ws} sandboxes={items.map((s) => s.name)} />
      </Stack>
    </>
  );
}

function ShellRules({ ws }: { ws: string }) {
  const rules = useQuery({
    queryKey: ['shell-rules', ws],
    queryFn: () => unwrap(api.GET('/v1/workspaces/{ws}/shell-rules', { params: { path: { ws } } })),
  });
  return (
    <Card withBorder component="section" aria-labelledby="rules-title">
      <Group justify="space-between" mb="xs">
        <Title order={2} size="h4" id="rules-title">
          Shell rules
        </Title>
        {rules.data && (
          <Text size="sm" c="dimmed">
            version {rules.data.version}
            {rules.data.updated_by ? ` by ${rules.data.updated_by}` : ''} · a prompt asks{' '}
            {rules.data.elicitation ? 'the person at their client, else an approver' : 'an approver'}
          </Text>
        )}
      </Group>
      {rules.isPending ? (
        <Loading what="the shell rules" />
      ) : rules.error ? (
        <ErrorState error={rules.error} retry={() => void rules.refetch()} />
      ) : rules.data.rules.length === 0 ? (
        <EmptyState title="No shell rules">
          Every command of the bash tool runs, bounded by the sandbox. Rules are set with{' '}
          <Code>PUT /v1/workspaces/{ws}/shell-rules</Code>.
        </EmptyState>
      ) : (
        <Table>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Command</Table.Th>
              <Table.Th>Decision</Table.Th>
              <Table.Th>Why</Table.Th>
              <Table.Th>Source</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rules.data.rules.map((rule, i) => (
              <Table.Tr key={i}>
                <Table.Td>
                  <Code>{ruleText(rule)}</Code>
                </Table.Td>
                <Table.Td>
                  <Badge color={DECISION_COLOR[rule.decision]}>{rule.decision}</Badge>
                </Table.Td>
                <Table.Td>{rule.justification ?? '—'}</Table.Td>
                <Table.Td>
                  <Code>{rule.source ?? '—'}</Code>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Card>
  );
}

/** "What would this line do": the rules' decision of a command line, without running it. */
function CheckLine({ ws, sandboxes }: { ws: string; sandboxes: string[] }) {
  const [command, setCommand] = useState('');
  const [sandbox, setSandbox] = useState<string | null>(null);
  const check = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/v1/workspaces/{ws}/shell-rules/check', {
          params: { path: { ws } },
          body: { command, ...(sandbox ? { sandbox } : {}) },
        }),
      ),
  });
  const answer = check.data;
  return (
    <Card withBorder component="section" aria-labelledby="check-title">
      <Title order={2} size="h4" id="check-title" mb="xs">
        What would this line do?
      </Title>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (command.trim()) check.mutate();
        }}
      >
        <Group align="flex-end">
          <TextInput
            label="Command line"
            description="As an agent would give it to the bash tool; nothing runs"
            value={command}
            onChange={(e) => setCommand(e.currentTarget.value)}
            styles={{ input: { fontFamily: 'var(--mantine-font-family-monospace)' } }}
            spellCheck={false}
            style={{ flex: 1, minWidth: 240 }}
          />
          <Select
            label="Resolve programs in"
            description="Empty: compare by name"
            placeholder="by name only"
            data={sandboxes}
            value={sandbox}
            onChange={setSandbox}
            clearable
            w={220}
          />
          <Button type="submit" loading={check.isPending}>
            Check
          </Button>
        </Group>
      </form>
      <div aria-live="polite">
        {answer && (
          <Alert mt="sm" color={DECISION_COLOR[answer.decision]} title={`Decision: ${answer.decision}`}>
            <Stack gap={4}>
              <Text size="sm">
                {answer.rule ? (
                  <>
                    Rule <Code>{ruleText(answer.rule)}</Code> ({answer.rule.source ?? 'no source'})
                  </>
                ) : (
                  'No rule decided it'
                )}
                {answer.resolved_in ? `; programs resolved in sandbox ${answer.resolved_in}` : ''}
              </Text>
              <Text size="sm">{answer.reason}</Text>
            </Stack>
          </Alert>
        )}
      </div>
    </Card>
  );
}
