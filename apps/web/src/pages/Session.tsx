import { Anchor, Badge, Button, Card, Code, Group, Stack, Text, Textarea, Title } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { Confirm } from '../app/dialogs';
import { useWorkspaceEvents } from '../app/events';
import { usePagedList } from '../app/paging';
import { EmptyState, ErrorState, Loading, PagedList, PageTitle, when } from '../app/ui';
import { SESSION_STATE_COLOR } from './Sessions';

const LEVEL_COLOR: Record<string, string> = { info: 'blue', warning: 'orange', question: 'grape' };
const MESSAGE_EVENTS = ['session.message'];

/**
 * One agent session: what it may do, its conversation with its people (an
 * answer can be written here), and "end session", after which every token of
 * the session is refused.
 */
export default function Session() {
  const { ws, id } = useParams() as { ws: string; id: string };
  const [ending, setEnding] = useState(false);
  const queryClient = useQueryClient();
  const session = useQuery({
    queryKey: ['session', ws, id],
    queryFn: () => unwrap(api.GET('/v1/workspaces/{ws}/sessions/{id}', { params: { path: { ws, id } } })),
  });
  const end = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/workspaces/{ws}/sessions/{id}', { params: { path: { ws, id } } })),
    onSuccess: (ended) => {
      setEnding(false);
      queryClient.setQueryData(['session', ws, id], ended);
      void queryClient.invalidateQueries({ queryKey: ['sessions', ws] });
      notifications.show({ color: 'green', message: 'Session ended: its tokens are refused from now on' });
    },
  });
  if (session.isPending) return <Loading what="the session" />;
  if (session.error) return <ErrorState error={session.error} retry={() => void session.refetch()} />;
  const s = session.data;
  return (
    <>
      <PageTitle
        actions={
          s.state === 'live' && (
            <Button color="red" variant="light" onClick={() => setEnding(true)}>
              End session
            </Button>
          )
        }
      >
        {s.name ?? `Session ${s.id.slice(0, 8)}`}
      </PageTitle>
      <Stack>
        <Card withBorder component="section" aria-labelledby="session-title">
          <Group justify="space-between" mb="xs">
            <Title order={2} size="h4" id="session-title">
              What it may do
            </Title>
            <Badge color={SESSION_STATE_COLOR[s.state]} aria-label={`State: ${s.state}`}>
              {s.state}
            </Badge>
          </Group>
          <Stack gap={4}>
            <Text size="sm">
              Acts for <Code>{s.created_by}</Code>
              {s.agent ? `, run by ${s.agent}` : ''}; started {when(s.created_at)}
              {s.ended_at
                ? `, ended ${when(s.ended_at)}${s.ended_by ? ` by ${s.ended_by}` : ''}`
                : `, expires ${when(s.expires_at)}`}
            </Text>
            <Text size="sm">
              Capabilities:{' '}
              {s.caps.map((c) => (
                <Code key={c} mr={4}>
                  {c}
                </Code>
              ))}
            </Text>
            {s.caveats.length > 0 && (
              <Text size="sm">
                Caveats:{' '}
                {s.caveats.map((c) => (
                  <Code key={c} mr={4}>
                    {c}
                  </Code>
                ))}
              </Text>
            )}
            <Anchor component={Link} to={`/workspaces/${ws}/sessions`} size="sm">
              All sessions
            </Anchor>
          </Stack>
        </Card>
        <Messages ws={ws} id={id} live={s.state === 'live'} />
      </Stack>
      <Confirm
        opened={ending}
        onClose={() => setEnding(false)}
        title="End this session?"
        action="End session"
        color="red"
        loading={end.isPending}
        onConfirm={() => end.mutate()}
      >
        Every token of the session is refused at once, on every replica. The agent cannot go on.
      </Confirm>
    </>
  );
}

function Messages({ ws, id, live }: { ws: string; id: string; live: boolean }) {
  const { query, items } = usePagedList(['session-messages', ws, id], (cursor) =>
    unwrap(api.GET('/v1/workspaces/{ws}/sessions/{id}/messages', { params: { path: { ws, id }, query: { cursor } } })),
  );
  const [text, setText] = useState('');
  const queryClient = useQueryClient();
  // a message from the agent (or another person's answer) shows as it is written, without a reload
  const streaming = useWorkspaceEvents(
    ws,
    MESSAGE_EVENTS,
    (event) => {
      if (event.session === id) void queryClient.invalidateQueries({ queryKey: ['session-messages', ws, id] });
    },
    live,
  );
  const answer = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/v1/workspaces/{ws}/sessions/{id}/messages', { params: { path: { ws, id } }, body: { text } })),
    onSuccess: () => {
      setText('');
      void queryClient.invalidateQueries({ queryKey: ['session-messages', ws, id] });
    },
  });
  return (
    <Card withBorder component="section" aria-labelledby="messages-title">
      <Group justify="space-between" mb="xs">
        <Title order={2} size="h4" id="messages-title">
          Messages
        </Title>
        {live && (
          <Badge variant="light" color={streaming ? 'green' : 'gray'}>
            {streaming ? 'live updates' : 'connecting'}
          </Badge>
        )}
      </Group>
      <PagedList
        query={query}
        count={items.length}
        what="messages"
        empty={
          <EmptyState title="No messages">The agent writes to its people here, and reads their answers.</EmptyState>
        }
      >
        <Stack gap="xs" component="ol" m={0} p={0} style={{ listStyle: 'none' }} aria-label="Conversation">
          {items.map((m) => (
            <li key={m.id}>
              <Group gap="xs" wrap="nowrap" align="flex-start">
                <Badge variant="light" color={m.direction === 'agent' ? LEVEL_COLOR[m.level] : 'gray'}>
                  {m.direction === 'agent' ? `agent · ${m.level}` : 'people'}
                </Badge>
                <div>
                  <Text size="sm" style={{ whiteSpace: 'pre-wrap' }}>
                    {m.text}
                  </Text>
                  <Text size="xs" c="dimmed">
                    {m.author} · {when(m.created_at)}
                  </Text>
                </div>
              </Group>
            </li>
          ))}
        </Stack>
      </PagedList>
      {live && (
        <form
          onSubmit={(event) => {
            event.preventDefault();
            if (text.trim()) answer.mutate();
          }}
        >
          <Group align="flex-end" mt="sm">
            <Textarea
              label="Answer"
              description="The agent reads it on its channel"
              value={text}
              onChange={(e) => setText(e.currentTarget.value)}
              autosize
              minRows={1}
              style={{ flex: 1 }}
            />
            <Button type="submit" loading={answer.isPending}>
              Send
            </Button>
          </Group>
        </form>
      )}
    </Card>
  );
}
