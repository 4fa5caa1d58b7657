import {
  Accordion,
  Alert,
  Badge,
  Button,
  Card,
  Code,
  Grid,
  Group,
  Modal,
  PasswordInput,
  Select,
  Stack,
  Switch,
  Table,
  Tabs,
  TagsInput,
  Text,
  TextInput,
  Title,
  UnstyledButton,
  VisuallyHidden,
} from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type ChangeEvent, type ReactNode, useEffect, useState } from 'react';
import { useSearchParams } from 'react-router';
import { api, unwrap } from '../api/client';
import type { operations } from '../api/schema.gen';
import { usePagedList } from '../app/paging';
import { useMe } from '../app/session';
import { WhenBy } from '../app/cells';
import { Confirm, ShownOnce } from '../app/dialogs';
import { EmptyState, PagedList, PageTitle, when } from '../app/ui';

type Webhook = operations['getV1WebhooksId']['responses'][200]['content']['application/json'];
type Delivery =
  operations['getV1WebhooksIdDeliveries']['responses'][200]['content']['application/json']['items'][number];

/** Deliveries and endpoint health change without anyone touching the page: it reads them again this often. */
const REFRESH_MS = 3000;

const STATUS_COLOR: Record<string, string> = {
  active: 'green',
  failing: 'yellow',
  paused: 'red',
  disabled: 'gray',
  delivered: 'green',
  pending: 'yellow',
  failed: 'red',
  skipped: 'gray',
};

/** While the page is open, the queries under `key` are read again every REFRESH_MS. */
function useRefreshing(key: readonly unknown[]): void {
  const queryClient = useQueryClient();
  const id = JSON.stringify(key);
  useEffect(() => {
    const timer = setInterval(() => void queryClient.invalidateQueries({ queryKey: JSON.parse(id) }), REFRESH_MS);
    return () => clearInterval(timer);
  }, [queryClient, id]);
}

/** What the receiver answered: its HTTP status, or that there was no answer. */
function answerOf(status: number | null): string {
  return status === null ? 'no answer' : `HTTP ${status}`;
}

/**
 * Where the organisation's events go: webhook endpoints (their health, each
 * delivery with every attempt and the receiver's answer, resuming a paused
 * one) and the SIEM sinks the audit log streams to.
 */
export default function Webhooks() {
  const [params, setParams] = useSearchParams();
  const tab = params.get('tab') === 'sinks' ? 'sinks' : 'webhooks';
  return (
    <>
      <PageTitle>Webhooks and audit sinks</PageTitle>
      <Tabs value={tab} onChange={(value) => setParams(value === 'sinks' ? { tab: 'sinks' } : {}, { replace: true })}>
        <Tabs.List mb="md">
          <Tabs.Tab value="webhooks">Webhooks</Tabs.Tab>
          <Tabs.Tab value="sinks">Audit sinks</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="webhooks">{tab === 'webhooks' && <Endpoints />}</Tabs.Panel>
        <Tabs.Panel value="sinks">{tab === 'sinks' && <Sinks />}</Tabs.Panel>
      </Tabs>
    </>
  );
}

function Endpoints() {
  const { query, items } = usePagedList(['webhooks'], (cursor) =>
    unwrap(api.GET('/v1/webhooks', { params: { query: { cursor } } })),
  );
  useRefreshing(['webhooks']);
  const [selected, setSelected] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);
  const current = items.find((w) => w.id === selected) ?? null;
  return (
    <>
      <Group justify="flex-end" mb="sm">
        <Button onClick={() => setCreating(true)}>Add endpoint</Button>
      </Group>
      <Grid>
        <Grid.Col span={{ base: 12, md: 5 }}>
          <PagedList
            query={query}
            count={items.length}
            what="webhooks"
            empty={
              <EmptyState title="No endpoints">
                An endpoint receives the organisation's events as signed POSTs: approvals, policy changes, executions, …
              </EmptyState>
            }
          >
            <Table highlightOnHover aria-label="Webhook endpoints">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Endpoint</Table.Th>
                  <Table.Th>Events</Table.Th>
                  <Table.Th>State</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {items.map((w) => (
                  <Table.Tr key={w.id} bg={w.id === selected ? 'var(--mantine-color-blue-light)' : undefined}>
                    <Table.Td>
                      <UnstyledButton onClick={() => setSelected(w.id)} aria-pressed={w.id === selected} td="underline">
                        {w.name}
                      </UnstyledButton>
                      <Text size="xs" c="dimmed">
                        {w.host}
                        {w.workspace ? ` · ${w.workspace} only` : ''}
                      </Text>
                    </Table.Td>
                    <Table.Td>{w.events.length > 0 ? w.events.join(', ') : 'every event'}</Table.Td>
                    <Table.Td>
                      <Badge color={STATUS_COLOR[w.status]}>{w.status}</Badge>
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </PagedList>
        </Grid.Col>
        <Grid.Col span={{ base: 12, md: 7 }}>
          {current ? (
            <EndpointView webhook={current} onRemoved={() => setSelected(null)} />
          ) : (
            <EmptyState title="Pick an endpoint">
              Its deliveries, what the receiver answered, and its controls.
            </EmptyState>
          )}
        </Grid.Col>
      </Grid>
      <Modal opened={creating} onClose={() => setCreating(false)} title="New webhook endpoint" size="lg">
        {creating && (
          <CreateEndpoint
            onDone={(id) => {
              setCreating(false);
              if (id) setSelected(id);
            }}
          />
        )}
      </Modal>
    </>
  );
}

function EndpointView({ webhook: w, onRemoved }: { webhook: Webhook; onRemoved: () => void }) {
  const queryClient = useQueryClient();
  const refresh = () => {
    void queryClient.invalidateQueries({ queryKey: ['webhooks'] });
    void queryClient.invalidateQueries({ queryKey: ['webhook-deliveries', w.id] });
  };
  const { query, items } = usePagedList(['webhook-deliveries', w.id], (cursor) =>
    unwrap(api.GET('/v1/webhooks/{id}/deliveries', { params: { path: { id: w.id }, query: { cursor } } })),
  );
  useRefreshing(['webhook-deliveries', w.id]);
  const [removing, setRemoving] = useState(false);
  const resume = useMutation({
    mutationFn: () => unwrap(api.POST('/v1/webhooks/{id}/resume', { params: { path: { id: w.id } } })),
    onSuccess: () => {
      notifications.show({ color: 'green', message: `${w.name} resumed: new events are delivered again` });
      refresh();
    },
  });
  const setEnabled = useMutation({
    mutationFn: (enabled: boolean) =>
      unwrap(api.PATCH('/v1/webhooks/{id}', { params: { path: { id: w.id } }, body: { enabled } })),
    onSuccess: refresh,
  });
  const remove = useMutation({
    mutationFn: () => unwrap(api.DELETE('/v1/webhooks/{id}', { params: { path: { id: w.id } } })),
    onSuccess: () => {
      setRemoving(false);
      onRemoved();
      refresh();
    },
  });
  return (
    <Card withBorder component="section" aria-labelledby="endpoint-title">
      <Stack>
        <Group justify="space-between">
          <Title order={2} size="h4" id="endpoint-title">
            {w.name}
          </Title>
          <Badge color={STATUS_COLOR[w.status]} aria-label={`State: ${w.status}`}>
            {w.status}
          </Badge>
        </Group>
        <Text size="sm">
          Sends {w.events.length > 0 ? w.events.join(', ') : 'every event'} of{' '}
          {w.workspace ? `workspace ${w.workspace}` : 'the whole organisation'} to <Code>{w.host}</Code> as {w.format};
          created {when(w.created_at)}
          {w.created_by ? ` by ${w.created_by}` : ''}.
        </Text>
        {w.paused && (
          <Alert color="red" title="Paused" role="alert">
            <Stack gap="xs">
              <Text size="sm">
                Since {when(w.paused_at)}: {w.paused_reason}. Events that occur while it is paused are not sent, not
                even after it resumes.
              </Text>
              <Button w="fit-content" loading={resume.isPending} onClick={() => resume.mutate()}>
                Resume
              </Button>
            </Stack>
          </Alert>
        )}
        {!w.paused && w.failing_since && (
          <Alert color="yellow" title="Failing">
            Deliveries have failed since {when(w.failing_since)}; it is paused if they keep failing.
          </Alert>
        )}
        <Group justify="space-between">
          <Switch
            label="Enabled"
            checked={w.enabled}
            disabled={setEnabled.isPending}
            onChange={(e) => setEnabled.mutate(e.currentTarget.checked)}
          />
          <Button variant="subtle" color="red" size="xs" onClick={() => setRemoving(true)}>
            Delete endpoint
          </Button>
        </Group>
        <Title order={3} size="h5">
          Deliveries
        </Title>
        <PagedList
          query={query}
          count={items.length}
          what="deliveries"
          empty={<EmptyState title="No deliveries yet">Each event this endpoint takes is listed here.</EmptyState>}
        >
          <Accordion variant="separated" aria-label="Deliveries">
            {items.map((d) => (
              <DeliveryItem key={d.id} delivery={d} />
            ))}
          </Accordion>
        </PagedList>
      </Stack>
      <Confirm
        opened={removing}
        onClose={() => setRemoving(false)}
        title="Delete endpoint"
        action="Delete"
        color="red"
        loading={remove.isPending}
        onConfirm={() => remove.mutate()}
      >
        Delete “{w.name}” and its delivery log? Its receiver gets nothing more.
      </Confirm>
    </Card>
  );
}

function DeliveryItem({ delivery: d }: { delivery: Delivery }) {
  return (
    <Accordion.Item value={d.id}>
      <Accordion.Control>
        <Group justify="space-between" wrap="nowrap" gap="xs">
          <Code>{d.event_type}</Code>
          <Group gap="xs" wrap="nowrap">
            <Text size="sm">{answerOf(d.last_status)}</Text>
            <Badge color={STATUS_COLOR[d.status]}>{d.status}</Badge>
          </Group>
        </Group>
        <Text size="xs" c="dimmed">
          {when(d.created_at)} · {d.attempt_count} attempt{d.attempt_count === 1 ? '' : 's'}
          {d.last_error ? ` · ${d.last_error}` : ''}
        </Text>
      </Accordion.Control>
      <Accordion.Panel>
        <Text size="xs" mb="xs">
          Event <Code>{d.event_id}</Code>, delivery <Code>{d.id}</Code> (the <Code>x-aileron-delivery</Code> header)
        </Text>
        <Table aria-label={`Attempts of ${d.event_id}`}>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>#</Table.Th>
              <Table.Th>Answer</Table.Th>
              <Table.Th>Error</Table.Th>
              <Table.Th>Took</Table.Th>
              <Table.Th>At</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {d.attempts.map((a) => (
              <Table.Tr key={a.attempt}>
                <Table.Td>{a.attempt}</Table.Td>
                <Table.Td>{answerOf(a.status)}</Table.Td>
                <Table.Td>{a.error ?? '—'}</Table.Td>
                <Table.Td>{a.duration_ms} ms</Table.Td>
                <Table.Td>{when(a.at)}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Accordion.Panel>
    </Accordion.Item>
  );
}

/** The secret a new endpoint or sink signs with: shown this once. */
function SecretOnce({ secret, onDone }: { secret: string; onDone: () => void }) {
  return (
    <ShownOnce
      what="signing secret"
      value={secret}
      note={
        <>
          The receiver checks each request's <Code>x-aileron-signature</Code> with it.
        </>
      }
      onDone={onDone}
    />
  );
}

/** Where signed POSTs go: what a webhook endpoint and an audit sink are both made of. */
interface Target {
  name: string;
  url: string;
  /** empty: the server generates one */
  secret: string;
}

/** The name, URL and signing secret of a new endpoint or sink; `children`: the fields of its own, between them. */
function TargetForm({
  placeholder,
  pending,
  onSubmit,
  children,
}: {
  placeholder: string;
  pending: boolean;
  onSubmit: (target: { name: string; url: string; secret?: string }) => void;
  children?: ReactNode;
}) {
  const [target, setTarget] = useState<Target>({ name: '', url: '', secret: '' });
  const field = (key: keyof Target) => ({
    value: target[key],
    onChange: (e: ChangeEvent<HTMLInputElement>) => {
      const value = e.currentTarget.value;
      setTarget((t) => ({ ...t, [key]: value }));
    },
  });
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        onSubmit({ name: target.name, url: target.url, ...(target.secret ? { secret: target.secret } : {}) });
      }}
    >
      <Stack>
        <TextInput label="Name" required data-autofocus {...field('name')} />
        <TextInput
          label="URL"
          description="http(s); only its host is shown again. Private addresses are refused unless the operator allows them."
          placeholder={placeholder}
          required
          {...field('url')}
        />
        {children}
        <PasswordInput
          label="Signing secret"
          description="16 to 256 characters; empty: one is generated and shown once"
          autoComplete="off"
          {...field('secret')}
        />
        <Button type="submit" loading={pending}>
          Create
        </Button>
      </Stack>
    </form>
  );
}

function CreateEndpoint({ onDone }: { onDone: (id: string | null) => void }) {
  const me = useMe();
  const [events, setEvents] = useState<string[]>([]);
  const [workspace, setWorkspace] = useState<string | null>(null);
  const [format, setFormat] = useState<'json' | 'slack'>('json');
  const queryClient = useQueryClient();
  const create = useMutation({
    mutationFn: (target: { name: string; url: string; secret?: string }) =>
      unwrap(api.POST('/v1/webhooks', { body: { ...target, events, format, ...(workspace ? { workspace } : {}) } })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['webhooks'] }),
  });
  if (create.data) return <SecretOnce secret={create.data.secret} onDone={() => onDone(create.data.id)} />;
  return (
    <TargetForm placeholder="https://hooks.example.com/aileron" pending={create.isPending} onSubmit={create.mutate}>
      <TagsInput
        label="Events"
        description="Types (policy.updated) or whole domains (approval.*), Enter after each; none: every event"
        value={events}
        onChange={setEvents}
      />
      <Select
        label="Workspace"
        description="Empty: every workspace and the organisation's own events"
        clearable
        data={me.data?.workspaces.map((w) => ({ value: w.slug, label: w.name })) ?? []}
        value={workspace}
        onChange={setWorkspace}
      />
      <Select
        label="Format"
        data={[
          { value: 'json', label: 'JSON (the event envelope)' },
          { value: 'slack', label: 'Slack incoming webhook' },
        ]}
        value={format}
        allowDeselect={false}
        onChange={(value) => (value === 'json' || value === 'slack') && setFormat(value)}
      />
    </TargetForm>
  );
}

function Sinks() {
  const { query, items } = usePagedList(['audit-sinks'], (cursor) =>
    unwrap(api.GET('/v1/audit/sinks', { params: { query: { cursor } } })),
  );
  useRefreshing(['audit-sinks']);
  const queryClient = useQueryClient();
  const [creating, setCreating] = useState(false);
  const [removing, setRemoving] = useState<{ id: string; name: string } | null>(null);
  const remove = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/v1/audit/sinks/{id}', { params: { path: { id } } })),
    onSuccess: () => {
      setRemoving(null);
      void queryClient.invalidateQueries({ queryKey: ['audit-sinks'] });
    },
  });
  // a paused sink keeps its place in every chain: resumed, it is sent what was written meanwhile
  const toggle = useMutation({
    mutationFn: ({ id, pause }: { id: string; pause: boolean }) =>
      unwrap(
        pause
          ? api.POST('/v1/audit/sinks/{id}/pause', { params: { path: { id } } })
          : api.POST('/v1/audit/sinks/{id}/resume', { params: { path: { id } } }),
      ),
    onSuccess: (sink) => {
      notifications.show({
        color: 'green',
        message: sink.enabled
          ? `${sink.name} resumed: it is sent every record written while it was paused`
          : `${sink.name} paused: nothing is sent to it until it is resumed`,
      });
      void queryClient.invalidateQueries({ queryKey: ['audit-sinks'] });
    },
  });
  return (
    <>
      <Group justify="space-between" mb="sm">
        <Text size="sm" c="dimmed" maw={640}>
          A sink receives every audit record of every chain of the organisation, in chain order, as signed JSON batches:
          a copy of the log out of this installation's reach. A failing sink is retried until it answers; a paused one
          is sent, once resumed, everything written while it was paused.
        </Text>
        <Button onClick={() => setCreating(true)}>Add sink</Button>
      </Group>
      <PagedList
        query={query}
        count={items.length}
        what="audit sinks"
        empty={<EmptyState title="No sinks">Stream the audit log to a SIEM (Splunk, Elastic, …).</EmptyState>}
      >
        <Table aria-label="Audit sinks">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Sink</Table.Th>
              <Table.Th>State</Table.Th>
              <Table.Th>Last delivery</Table.Th>
              <Table.Th>Last error</Table.Th>
              <Table.Th>Created</Table.Th>
              <Table.Th>
                <VisuallyHidden>Actions</VisuallyHidden>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {items.map((s) => (
              <Table.Tr key={s.id}>
                <Table.Td>
                  {s.name}
                  <Text size="xs" c="dimmed">
                    {s.host}
                  </Text>
                </Table.Td>
                <Table.Td>
                  <Badge color={s.enabled ? 'green' : 'gray'} miw="max-content">
                    {s.enabled ? 'active' : 'paused'}
                  </Badge>
                </Table.Td>
                <Table.Td>{s.last_delivered_at ? when(s.last_delivered_at) : 'none yet'}</Table.Td>
                <Table.Td>
                  {s.last_error ?? '—'}
                  {s.last_error && (
                    <Text size="xs" c="dimmed">
                      {when(s.last_error_at)}
                    </Text>
                  )}
                </Table.Td>
                <Table.Td>
                  <WhenBy at={s.created_at} by={s.created_by} />
                </Table.Td>
                <Table.Td>
                  <Group gap={4} wrap="nowrap">
                    <Button
                      variant="subtle"
                      size="xs"
                      aria-label={`${s.enabled ? 'Pause' : 'Resume'} ${s.name}`}
                      loading={toggle.isPending && toggle.variables.id === s.id}
                      onClick={() => toggle.mutate({ id: s.id, pause: s.enabled })}
                    >
                      {s.enabled ? 'Pause' : 'Resume'}
                    </Button>
                    <Button
                      variant="subtle"
                      color="red"
                      size="xs"
                      aria-label={`Remove ${s.name}`}
                      onClick={() => setRemoving({ id: s.id, name: s.name })}
                    >
                      Remove
                    </Button>
                  </Group>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </PagedList>
      <Modal opened={creating} onClose={() => setCreating(false)} title="New audit sink">
        {creating && <CreateSink onDone={() => setCreating(false)} />}
      </Modal>
      <Confirm
        opened={removing !== null}
        onClose={() => setRemoving(null)}
        title="Remove sink"
        action="Remove"
        color="red"
        loading={remove.isPending}
        onConfirm={() => removing && remove.mutate(removing.id)}
      >
        Stop streaming the audit log to “{removing?.name}”? Records already sent stay there.
      </Confirm>
    </>
  );
}

function CreateSink({ onDone }: { onDone: () => void }) {
  const queryClient = useQueryClient();
  const create = useMutation({
    mutationFn: (target: { name: string; url: string; secret?: string }) =>
      unwrap(api.POST('/v1/audit/sinks', { body: target })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['audit-sinks'] }),
  });
  if (create.data) return <SecretOnce secret={create.data.secret} onDone={onDone} />;
  return (
    <TargetForm placeholder="https://siem.example.com/aileron" pending={create.isPending} onSubmit={create.mutate} />
  );
}
