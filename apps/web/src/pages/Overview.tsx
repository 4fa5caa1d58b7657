import '@mantine/charts/styles.css';
import { BarChart, LineChart } from '@mantine/charts';
import {
  Anchor,
  Badge,
  Button,
  Card,
  Group,
  SegmentedControl,
  SimpleGrid,
  Stack,
  Table,
  Text,
  Title,
} from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useParams, useSearchParams } from 'react-router';
import { api, ApiProblem, unwrap } from '../api/client';
import { useCurrentWorkspace } from '../app/Shell';
import { useMe } from '../app/session';
import { EmptyState, ErrorState, Loading, PageTitle, when } from '../app/ui';

type Window = '1h' | '1d';
type OverviewData = Awaited<ReturnType<typeof fetchOverview>>;
type Instance = OverviewData['pool']['instances'][number];
type Gateway = OverviewData['gateways']['recent'][number];

const fetchOverview = (ws: string, window: Window) =>
  unwrap(api.GET('/v1/workspaces/{ws}/overview', { params: { path: { ws }, query: { window } } }));

const STATE_COLOR: Record<Instance['state'], string> = {
  running: 'green',
  suspected: 'yellow',
  starting: 'blue',
  crashed: 'red',
};

/**
 * The console's landing page: one workspace at a glance, from the aggregate
 * endpoint (`GET …/overview`, counted by the database): calls, denials and
 * approvals over the last hour by minute or the last day by hour, approvals
 * waiting, the pool's instances and their health, the gateways last seen.
 */
export default function Overview() {
  // a workspace typed in the address is asked for as typed: one out of reach answers the API's 404
  const current = useCurrentWorkspace();
  const ws = useParams().ws ?? current;
  const me = useMe();
  const [params, setParams] = useSearchParams();
  const window: Window = params.get('window') === '1d' ? '1d' : '1h';
  const overview = useQuery({
    queryKey: ['overview', ws, window],
    queryFn: () => fetchOverview(ws!, window),
    enabled: ws !== null,
    // the current minute fills as calls come
    refetchInterval: 30_000,
  });
  const name = me.data?.workspaces.find((w) => w.slug === ws)?.name ?? ws;
  const picker = (
    <SegmentedControl
      aria-label="Time span"
      value={window}
      onChange={(value) => setParams(value === '1d' ? { window: '1d' } : {}, { replace: true })}
      data={[
        { value: '1h', label: 'Last hour' },
        { value: '1d', label: 'Last day' },
      ]}
    />
  );
  if (me.isPending) return <Loading what="your workspaces" />;
  if (ws === null)
    return (
      <>
        <PageTitle>Overview</PageTitle>
        <EmptyState title="No workspace yet">
          <Anchor component={Link} to="/workspaces">
            Create a workspace
          </Anchor>{' '}
          to see its calls here.
        </EmptyState>
      </>
    );
  return (
    <>
      <PageTitle actions={picker}>Overview of {name}</PageTitle>
      {overview.isPending ? (
        <Loading what="the overview" />
      ) : overview.error instanceof ApiProblem && overview.error.code === 'FORBIDDEN' ? (
        // the figures are the audit log's, counted: a member lands here and is shown where to go instead
        <EmptyState title="The overview is for owners, admins and auditors">
          The workspace's{' '}
          <Anchor component={Link} to={`/workspaces/${ws}/approvals`}>
            approvals
          </Anchor>{' '}
          and{' '}
          <Anchor component={Link} to={`/workspaces/${ws}/policy`}>
            policy
          </Anchor>{' '}
          are open to you.
        </EmptyState>
      ) : overview.error ? (
        <ErrorState error={overview.error} retry={() => void overview.refetch()} />
      ) : (
        <Figures ws={ws} data={overview.data} />
      )}
    </>
  );
}

function Figures({ ws, data }: { ws: string; data: OverviewData }) {
  const perMinute = data.window === '1h';
  const unit = perMinute ? 'minute' : 'hour';
  const running = data.pool.instances.filter((i) => i.state === 'running').length;
  return (
    <Stack>
      <SimpleGrid cols={{ base: 2, sm: 3, lg: 6 }} aria-label="Figures">
        <Figure label="Calls" value={data.totals.calls} />
        <Figure label="Denied" value={data.totals.denied} />
        <Figure label="Sent to approval" value={data.totals.approval} />
        <Figure
          label="Approvals waiting"
          value={data.approvals_waiting}
          link={{ to: `/workspaces/${ws}/approvals`, label: 'Open the inbox' }}
        />
        <Figure label="Pool instances running" value={`${running} of ${data.pool.instances.length}`} />
        <Figure label="Gateways seen" value={`${data.gateways.seen_in_window} of ${data.gateways.enrolled}`} />
      </SimpleGrid>
      <CallsChart data={data} unit={unit} />
      <SimpleGrid cols={{ base: 1, lg: 2 }}>
        <PoolInstances instances={data.pool.instances} />
        <Gateways gateways={data.gateways.recent} enrolled={data.gateways.enrolled} />
      </SimpleGrid>
    </Stack>
  );
}

function Figure({
  label,
  value,
  link,
}: {
  label: string;
  value: number | string;
  link?: { to: string; label: string };
}) {
  return (
    <Card withBorder padding="sm" role="group" aria-label={label}>
      <Text size="xs" c="dimmed" tt="uppercase" fw={700}>
        {label}
      </Text>
      <Text fz={28} fw={700} lh={1.3}>
        {value}
      </Text>
      {link && (
        <Anchor component={Link} to={link.to} size="sm">
          {link.label}
        </Anchor>
      )}
    </Card>
  );
}

type Bucket = OverviewData['buckets'][number];

function label(bucket: Bucket, unit: string): string {
  const at = new Date(bucket.start);
  return unit === 'minute'
    ? at.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' })
    : at.toLocaleString(undefined, { weekday: 'short', hour: '2-digit', minute: '2-digit' });
}

/** Calls per bucket as stacked bars, denials as a line; the numbers themselves in a table on request. */
function CallsChart({ data, unit }: { data: OverviewData; unit: string }) {
  const [table, setTable] = useState(false);
  const points = data.buckets.map((b) => ({ ...b, at: label(b, unit) }));
  const busy = data.buckets.filter((b) => b.calls > 0);
  return (
    <SimpleGrid cols={{ base: 1, lg: 2 }}>
      <Card withBorder component="figure" m={0} aria-labelledby="calls-title">
        <Group justify="space-between" mb="xs">
          <Title order={2} size="h4" id="calls-title">
            Calls per {unit}
          </Title>
          <Button size="xs" variant="subtle" onClick={() => setTable((shown) => !shown)} aria-expanded={table}>
            {table ? 'Hide the numbers' : 'Show the numbers'}
          </Button>
        </Group>
        <BarChart
          h={220}
          data={points}
          dataKey="at"
          type="stacked"
          withLegend
          yAxisProps={{ allowDecimals: false }}
          tooltipAnimationDuration={0}
          series={[
            { name: 'allowed', label: 'Allowed', color: 'green.8' },
            { name: 'denied', label: 'Denied', color: 'red.8' },
            { name: 'approval', label: 'Sent to approval', color: 'yellow.8' },
          ]}
        />
        {table &&
          (busy.length === 0 ? (
            <Text size="sm" c="dimmed" mt="sm">
              No call in this span.
            </Text>
          ) : (
            <Table mt="sm" aria-label={`Calls per ${unit}`}>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>{unit === 'minute' ? 'Minute' : 'Hour'}</Table.Th>
                  <Table.Th ta="right">Calls</Table.Th>
                  <Table.Th ta="right">Allowed</Table.Th>
                  <Table.Th ta="right">Denied</Table.Th>
                  <Table.Th ta="right">Sent to approval</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {busy.map((b) => (
                  <Table.Tr key={b.start}>
                    <Table.Td>{label(b, unit)}</Table.Td>
                    <Table.Td ta="right">{b.calls}</Table.Td>
                    <Table.Td ta="right">{b.allowed}</Table.Td>
                    <Table.Td ta="right">{b.denied}</Table.Td>
                    <Table.Td ta="right">{b.approval}</Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          ))}
      </Card>
      <Card withBorder component="figure" m={0} aria-labelledby="denials-title">
        <Title order={2} size="h4" id="denials-title" mb="xs">
          Denials and approvals per {unit}
        </Title>
        <LineChart
          h={220}
          data={points}
          dataKey="at"
          withLegend
          withDots={false}
          curveType="linear"
          yAxisProps={{ allowDecimals: false }}
          tooltipAnimationDuration={0}
          series={[
            { name: 'denied', label: 'Denied', color: 'red.8' },
            { name: 'approval', label: 'Sent to approval', color: 'yellow.8' },
          ]}
        />
      </Card>
    </SimpleGrid>
  );
}

function PoolInstances({ instances }: { instances: Instance[] }) {
  return (
    <Card withBorder component="section" aria-labelledby="pool-title">
      <Title order={2} size="h4" id="pool-title" mb="xs">
        Pool instances
      </Title>
      {instances.length === 0 ? (
        <EmptyState title="No instance running">
          The pool starts a server's instance on its first call (this list is the answering replica's).
        </EmptyState>
      ) : (
        <Table>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Server</Table.Th>
              <Table.Th>Version</Table.Th>
              <Table.Th>Health</Table.Th>
              <Table.Th ta="right">Crashes</Table.Th>
              <Table.Th ta="right">Calls in flight</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {instances.map((i) => (
              <Table.Tr key={`${i.server}-${i.id ?? 'none'}`}>
                <Table.Td>{i.server}</Table.Td>
                <Table.Td>{i.version ?? '—'}</Table.Td>
                <Table.Td>
                  <Badge color={STATE_COLOR[i.state]} variant="light">
                    {i.state}
                  </Badge>
                  {i.last_crash_at && (
                    <Text size="xs" c="dimmed">
                      last crash {when(i.last_crash_at)}
                    </Text>
                  )}
                </Table.Td>
                <Table.Td ta="right">{i.crashes}</Table.Td>
                <Table.Td ta="right">{i.inflight}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Card>
  );
}

/** "3 min ago", for the last time a gateway was seen. */
function ago(date: string | null): string {
  if (!date) return 'never';
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(date)) / 1000));
  if (seconds < 60) return 'just now';
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.round(seconds / 3600)} h ago`;
  return when(date);
}

function Gateways({ gateways, enrolled }: { gateways: Gateway[]; enrolled: number }) {
  return (
    <Card withBorder component="section" aria-labelledby="gateways-title">
      <Title order={2} size="h4" id="gateways-title" mb="xs">
        Gateways last seen
      </Title>
      {gateways.length === 0 ? (
        <EmptyState title="No gateway enrolled">A developer's gateway enrols with a code an admin makes.</EmptyState>
      ) : (
        <>
          <Table>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Gateway</Table.Th>
                <Table.Th>Last seen</Table.Th>
                <Table.Th>Enrolled</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {gateways.map((g) => (
                <Table.Tr key={g.id}>
                  <Table.Td>{g.name}</Table.Td>
                  <Table.Td title={g.last_seen_at ? when(g.last_seen_at) : undefined}>{ago(g.last_seen_at)}</Table.Td>
                  <Table.Td>{when(g.enrolled_at)}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
          {enrolled > gateways.length && (
            <Text size="sm" c="dimmed" mt="xs">
              The {gateways.length} seen most recently of {enrolled}.
            </Text>
          )}
        </>
      )}
    </Card>
  );
}
