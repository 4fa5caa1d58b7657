import {
  Alert,
  Badge,
  Button,
  Center,
  Code,
  Group,
  Modal,
  Select,
  SimpleGrid,
  Stack,
  Table,
  Text,
  TextInput,
  UnstyledButton,
} from '@mantine/core';
import { useDebouncedValue, useIntersection } from '@mantine/hooks';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { useParams, useSearchParams } from 'react-router';
import { api, unwrap } from '../api/client';
import type { operations } from '../api/schema.gen';
import { usePagedList } from '../app/paging';
import { EmptyState, ErrorState, Loading, PageTitle } from '../app/ui';

type AuditRecord =
  operations['getV1WorkspacesWsAudit']['responses'][200]['content']['application/json']['items'][number];
type Decision = 'allow' | 'deny' | 'approval';

/** The filters search and export share, as the URL carries them (a filtered view is a link). */
const TEXT_FILTERS = ['actor', 'server', 'tool', 'session'] as const;
type TextFilter = (typeof TEXT_FILTERS)[number];
interface Filters {
  from?: string;
  to?: string;
  actor?: string;
  server?: string;
  tool?: string;
  decision?: Decision;
  session?: string;
}

const RANGES = [
  { value: 'any', label: 'Any time' },
  { value: '1h', label: 'Last hour' },
  { value: '24h', label: 'Last 24 hours' },
  { value: '7d', label: 'Last 7 days' },
  { value: '30d', label: 'Last 30 days' },
  { value: 'custom', label: 'Between…' },
];
const RANGE_MS: Record<string, number> = {
  '1h': 3_600_000,
  '24h': 86_400_000,
  '7d': 7 * 86_400_000,
  '30d': 30 * 86_400_000,
};

function filtersOf(params: URLSearchParams): Filters {
  const filters: Filters = {};
  for (const key of ['from', 'to', ...TEXT_FILTERS] as const) {
    const value = params.get(key);
    if (value) filters[key] = value;
  }
  const decision = params.get('decision');
  if (decision === 'allow' || decision === 'deny' || decision === 'approval') filters.decision = decision;
  return filters;
}

/** `2026-11-24T12:00` (a datetime-local input, the person's own clock) ⇄ ISO-8601 with its zone (the API). */
function toIso(local: string): string | undefined {
  const date = new Date(local);
  return local && !Number.isNaN(date.getTime()) ? date.toISOString() : undefined;
}
function toLocal(iso: string | undefined): string {
  if (!iso) return '';
  const date = new Date(iso);
  return new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
}

/** To the second: two records a minute apart are not "the same time" in an audit log. */
function at(date: string): string {
  return new Date(date).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

const DECISION_COLOR: Record<string, string> = { allow: 'green', deny: 'red', approval: 'yellow' };

/**
 * The audit log of a workspace (`/workspaces/:ws/audit`) or of the
 * organisation itself (`/audit`): filtered on the server, read a page at a
 * time as the list is scrolled, exported by the server with the same filters,
 * and its hash chain verified on request.
 */
export default function Audit() {
  const ws = useParams().ws;
  const [params, setParams] = useSearchParams();
  // the page's own state, mirrored into the address: changes made in quick succession (a filter
  // cleared, another picked) apply in order, where each address change would be a navigation of its own
  const [filters, setFilters] = useState<Filters>(() => filtersOf(params));
  useEffect(() => {
    const wanted = new URLSearchParams(filters as Record<string, string>);
    if (wanted.toString() !== params.toString()) setParams(wanted, { replace: true });
  }, [filters, params, setParams]);
  const { query, items } = usePagedList(['audit', ws ?? null, filters], (cursor) =>
    ws
      ? unwrap(api.GET('/v1/workspaces/{ws}/audit', { params: { path: { ws }, query: { ...filters, cursor } } }))
      : unwrap(api.GET('/v1/audit', { params: { query: { ...filters, cursor } } })),
  );
  const queryClient = useQueryClient();
  const verify = useMutation({
    mutationFn: () =>
      ws
        ? unwrap(api.GET('/v1/workspaces/{ws}/audit/verify', { params: { path: { ws } } }))
        : unwrap(api.GET('/v1/audit/verify')),
    // the list is read again: a record changed behind the log's back shows as it is stored now
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['audit', ws ?? null] }),
  });
  const [shown, setShown] = useState<AuditRecord | null>(null);
  const base = ws ? `/v1/workspaces/${encodeURIComponent(ws)}/audit/export` : '/v1/audit/export';
  const exportUrl = (format: 'jsonl' | 'csv') =>
    `${base}?${new URLSearchParams({ ...(filters as Record<string, string>), format })}`;
  const bad = verify.data?.first_bad;

  return (
    <>
      <PageTitle
        actions={
          <Group gap="xs">
            {/* the server streams the file with the filters of the list: the browser only saves it */}
            <Button component="a" href={exportUrl('jsonl')} download variant="default">
              Export JSON Lines
            </Button>
            <Button component="a" href={exportUrl('csv')} download variant="default">
              Export CSV
            </Button>
            <Button loading={verify.isPending} onClick={() => verify.mutate()}>
              Verify chain
            </Button>
          </Group>
        }
      >
        {ws ? 'Audit log' : "The organisation's audit log"}
      </PageTitle>
      {verify.data &&
        (verify.data.ok ? (
          <Alert color="green" title="Chain intact" mb="md" role="status">
            All {verify.data.events} records and {verify.data.checkpoints} signed checkpoints are what was written.
          </Alert>
        ) : (
          <Alert color="red" title="Chain broken" mb="md" role="alert">
            Record #{bad?.seq}
            {bad?.id ? ` (${bad.id})` : ''} is not what was written: {bad?.reason}. Records after it cannot be trusted
            until this is explained.
          </Alert>
        ))}
      <FilterForm
        filters={filters}
        change={(patch) =>
          setFilters((current) =>
            patch === null
              ? {}
              : (Object.fromEntries(Object.entries({ ...current, ...patch }).filter(([, v]) => v)) as Filters),
          )
        }
      />
      {query.isPending ? (
        <Loading what="the audit log" />
      ) : query.error ? (
        <ErrorState error={query.error} retry={() => void query.refetch()} />
      ) : items.length === 0 ? (
        <EmptyState title="No records">
          {Object.keys(filters).length > 0
            ? 'Nothing matches these filters.'
            : 'Calls, decisions and changes are recorded here as they happen.'}
        </EmptyState>
      ) : (
        <>
          <Table highlightOnHover aria-label="Audit records">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>#</Table.Th>
                <Table.Th>When</Table.Th>
                <Table.Th>Event</Table.Th>
                <Table.Th>Who</Table.Th>
                <Table.Th>Call</Table.Th>
                <Table.Th>Decision</Table.Th>
                <Table.Th>Session</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {items.map((r) => (
                <Table.Tr key={r.id} bg={bad?.id === r.id ? 'var(--mantine-color-red-light)' : undefined}>
                  <Table.Td>
                    <UnstyledButton onClick={() => setShown(r)} aria-label={`Record ${r.seq}`} td="underline">
                      {r.seq}
                    </UnstyledButton>
                  </Table.Td>
                  <Table.Td>{at(r.occurred_at)}</Table.Td>
                  <Table.Td>
                    <Code>{r.type}</Code>
                  </Table.Td>
                  <Table.Td>
                    {r.actor ?? r.principal ?? '—'}
                    {r.actor && r.principal && r.principal !== r.actor && (
                      <Text size="xs" c="dimmed">
                        for {r.principal}
                      </Text>
                    )}
                  </Table.Td>
                  <Table.Td>{r.server || r.tool ? `${r.server ?? '?'} → ${r.tool ?? '?'}` : '—'}</Table.Td>
                  {/* wide enough for the badge's word: a cut "ALL…" reads as nothing */}
                  <Table.Td miw={100}>
                    {r.decision ? <Badge color={DECISION_COLOR[r.decision] ?? 'gray'}>{r.decision}</Badge> : '—'}
                  </Table.Td>
                  <Table.Td>{r.session ?? '—'}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
          <NextPages
            filtered={Object.keys(filters).length > 0}
            hasNext={query.hasNextPage}
            loading={query.isFetchingNextPage}
            count={items.length}
            fetchNext={() => void query.fetchNextPage()}
          />
        </>
      )}
      <Modal opened={shown !== null} onClose={() => setShown(null)} title={`Record #${shown?.seq ?? ''}`} size="lg">
        {shown && <RecordView record={shown} />}
      </Modal>
    </>
  );
}

/**
 * Endless scrolling: the next server page is read when the end of the list
 * comes into view. The button is the same thing for the keyboard.
 */
function NextPages({
  filtered,
  hasNext,
  loading,
  count,
  fetchNext,
}: {
  filtered: boolean;
  hasNext: boolean;
  loading: boolean;
  count: number;
  fetchNext: () => void;
}) {
  const { ref, entry } = useIntersection<HTMLDivElement>({ rootMargin: '200px' });
  const inView = entry?.isIntersecting ?? false;
  // runs again when a page has arrived: an end still in view asks for the one after
  useEffect(() => {
    if (inView && hasNext && !loading) fetchNext();
  }, [inView, hasNext, loading, fetchNext]);
  return (
    <Center ref={ref} mt="sm" mb="xl">
      {hasNext ? (
        <Button variant="default" loading={loading} onClick={fetchNext}>
          Load more
        </Button>
      ) : (
        <Text size="sm" c="dimmed" role="status">
          {filtered
            ? `${count} matching record${count === 1 ? '' : 's'}, all shown`
            : `${count} record${count === 1 ? '' : 's'}, back to the start of the log`}
        </Text>
      )}
    </Center>
  );
}

/** `change(patch)`: these filters set (undefined: removed), the others kept; `change(null)`: none. */
function FilterForm({ filters, change }: { filters: Filters; change: (patch: Filters | null) => void }) {
  const [text, setText] = useState<Record<TextFilter, string>>({
    actor: filters.actor ?? '',
    server: filters.server ?? '',
    tool: filters.tool ?? '',
    session: filters.session ?? '',
  });
  const [range, setRange] = useState(filters.from || filters.to ? 'custom' : 'any');
  // what is typed is searched once the person pauses, not at every key
  const [typed] = useDebouncedValue(text, 300);
  useEffect(() => {
    const changed = TEXT_FILTERS.some((key) => (typed[key].trim() || undefined) !== filters[key]);
    if (changed) change(Object.fromEntries(TEXT_FILTERS.map((key) => [key, typed[key].trim() || undefined])));
    // only what was typed starts a search; the filters it changes are read as they are now
  }, [typed]);
  const input = (key: TextFilter, label: string, placeholder: string) => (
    <TextInput
      label={label}
      placeholder={placeholder}
      value={text[key]}
      onChange={(e) => {
        const value = e.currentTarget.value;
        setText((t) => ({ ...t, [key]: value }));
      }}
    />
  );
  return (
    <Stack gap="xs" mb="md" component="form" role="search" aria-label="Filters" onSubmit={(e) => e.preventDefault()}>
      <SimpleGrid cols={{ base: 2, md: 4, lg: 7 }} spacing="xs">
        <Select
          label="Time"
          data={RANGES}
          value={range}
          allowDeselect={false}
          onChange={(value) => {
            if (!value) return;
            setRange(value);
            // a preset is a start time fixed when picked: the list does not shift under the reader
            if (value in RANGE_MS)
              change({ from: new Date(Date.now() - RANGE_MS[value]!).toISOString(), to: undefined });
            else if (value === 'any') change({ from: undefined, to: undefined });
          }}
        />
        {input('actor', 'Actor', 'user:…, token:…, system')}
        {input('server', 'Server', 'any')}
        {input('tool', 'Tool', 'any')}
        <Select
          label="Decision"
          placeholder="any"
          clearable
          data={[
            { value: 'allow', label: 'allow' },
            { value: 'deny', label: 'deny' },
            { value: 'approval', label: 'approval' },
          ]}
          value={filters.decision ?? null}
          onChange={(value) => change({ decision: (value as Decision | null) ?? undefined })}
        />
        {input('session', 'Agent session', 'any')}
        <Stack justify="flex-end">
          <Button
            variant="subtle"
            onClick={() => {
              setText({ actor: '', server: '', tool: '', session: '' });
              setRange('any');
              change(null);
            }}
          >
            Clear filters
          </Button>
        </Stack>
      </SimpleGrid>
      {range === 'custom' && (
        <Group gap="xs">
          <TextInput
            type="datetime-local"
            label="From"
            value={toLocal(filters.from)}
            onChange={(e) => change({ from: toIso(e.currentTarget.value) })}
          />
          <TextInput
            type="datetime-local"
            label="Until"
            value={toLocal(filters.to)}
            onChange={(e) => change({ to: toIso(e.currentTarget.value) })}
          />
        </Group>
      )}
    </Stack>
  );
}

function RecordView({ record: r }: { record: AuditRecord }) {
  const row = (label: string, value: string | null) => (
    <Table.Tr key={label}>
      <Table.Th w={140}>{label}</Table.Th>
      <Table.Td style={{ wordBreak: 'break-all' }}>{value ?? '—'}</Table.Td>
    </Table.Tr>
  );
  return (
    <Stack>
      <Table>
        <Table.Tbody>
          {row('Id', r.id)}
          {row('Event', r.type)}
          {row('Occurred', at(r.occurred_at))}
          {row('Recorded', at(r.recorded_at))}
          {row('Source', r.source)}
          {row('Actor', r.actor)}
          {row('Principal', r.principal)}
          {row('Mode', r.execution_mode)}
          {row('Session', r.session)}
          {row('Hash', r.hash)}
          {row('Previous hash', r.prev_hash)}
        </Table.Tbody>
      </Table>
      <div>
        <Text size="sm" fw={600}>
          Data
        </Text>
        <Code block aria-label="Data">
          {JSON.stringify(r.data, null, 2)}
        </Code>
      </div>
    </Stack>
  );
}
