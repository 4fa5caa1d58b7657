import {
  Alert,
  Anchor,
  Badge,
  Button,
  Card,
  Code,
  Divider,
  Grid,
  Group,
  List,
  Modal,
  Select,
  Stack,
  Table,
  Text,
  Textarea,
  TextInput,
  Title,
} from '@mantine/core';
import { useDebouncedValue } from '@mantine/hooks';
import { notifications } from '@mantine/notifications';
import {
  keepPreviousData,
  useInfiniteQuery,
  useMutation,
  useQueries,
  useQuery,
  useQueryClient,
} from '@tanstack/react-query';
import { useRef, useState } from 'react';
import { useParams } from 'react-router';
import { isMap, isSeq, LineCounter, parse, parseDocument, stringify } from 'yaml';
import { api, ApiProblem, unwrap } from '../api/client';
import { SideBySide } from '../app/diff';
import { NewerVersion, useDraft } from '../app/draft';
import { usePagedList } from '../app/paging';
import { EmptyState, ErrorState, Loading, PagedList, PageTitle, when } from '../app/ui';

interface Located {
  line: number | null;
  column?: number;
  message: string;
}

/** Where in the text a problem of the API is: its own "line N" for syntax, else the node its `body.rules[2].x` path names. */
export function locate(text: string, problems: { path?: string; message?: string }[]): Located[] {
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter });
  return problems.map((p) => {
    const message = `${p.path ? `${p.path}: ` : ''}${p.message ?? ''}`;
    // MALFORMED_YAML: "line 4, column 1: <what> at line 4, column 1:"
    const syntax = /^line (\d+)(?:, column (\d+))?:\s*(.*?)(?:\s+at line \d+, column \d+:?)?$/.exec(p.message ?? '');
    if (syntax)
      return { line: Number(syntax[1]), column: syntax[2] ? Number(syntax[2]) : undefined, message: syntax[3]! };
    const keys = (p.path ?? '').replace(/^body\.?/, '').match(/[^.[\]]+/g) ?? [];
    let node: unknown = doc.contents;
    let found: unknown = node;
    for (const key of keys) {
      if (isMap(node)) node = node.get(key, true);
      else if (isSeq(node)) node = node.get(Number(key), true);
      else break;
      if (node) found = node;
    }
    const range = (found as { range?: [number, number, number] } | null)?.range;
    return { line: range ? counter.linePos(range[0]).line : null, message };
  });
}

/** The workspace's policy: the YAML editor, the simulator, versions and rollback. */
export default function Policy() {
  const ws = useParams().ws!;
  const policy = useQuery({
    queryKey: ['policy', ws],
    // an admin coming back to the tab sees the version in force now (the editor keeps their unsaved typing: useDraft)
    refetchOnWindowFocus: 'always',
    queryFn: () => unwrap(api.GET('/v1/workspaces/{ws}/policy', { params: { path: { ws } } })),
  });
  if (policy.isPending) return <Loading what="the policy" />;
  if (policy.error) return <ErrorState error={policy.error} retry={() => void policy.refetch()} />;
  return (
    <>
      <PageTitle actions={<Badge>version {policy.data.version}</Badge>}>Policy</PageTitle>
      <Grid>
        <Grid.Col span={{ base: 12, lg: 7 }}>
          <Editor ws={ws} initial={stringify(policy.data.document)} version={policy.data.version} />
        </Grid.Col>
        <Grid.Col span={{ base: 12, lg: 5 }}>
          <Stack>
            <Simulator ws={ws} />
            <Versions ws={ws} current={policy.data.version} />
          </Stack>
        </Grid.Col>
      </Grid>
    </>
  );
}

/** The problems the API finds in a document: POLICY_INVALID lists them, MALFORMED_YAML names its line in the detail. */
function problemsOf(text: string, error: unknown): Located[] | null {
  if (!(error instanceof ApiProblem)) return null;
  if (error.code === 'MALFORMED_YAML') return locate(text, [{ message: error.message }]);
  if (error.code === 'POLICY_INVALID') return locate(text, error.problem.errors ?? [{ message: error.message }]);
  return null;
}

/** The document as YAML text: the server parses it and names each problem's line or field. */
const asYaml = (text: string) => ({
  body: text as never,
  bodySerializer: (body: unknown) => body as string,
  headers: { 'content-type': 'application/yaml' },
});

function Editor({ ws, initial, version }: { ws: string; initial: string; version: number }) {
  // a newer version in force (a rollback, another admin's save, the refetch after the author's own) never takes their typing
  const editing = useDraft(initial, version);
  const { value: text, set: setText } = editing;
  const [saveProblems, setSaveProblems] = useState<Located[] | null>(null);
  const area = useRef<HTMLTextAreaElement>(null);
  const queryClient = useQueryClient();
  // the server's own validation as the author types, once they pause
  const [draft] = useDebouncedValue(text, 400);
  const check = useQuery({
    queryKey: ['policy-validate', ws, draft],
    queryFn: async () => {
      try {
        const valid = await unwrap(
          api.POST('/v1/workspaces/{ws}/policy/validate', { params: { path: { ws } }, ...asYaml(draft) }),
        );
        return { valid, problems: [] as Located[] };
      } catch (error) {
        const problems = problemsOf(draft, error);
        if (problems) return { valid: null, problems };
        throw error;
      }
    },
    staleTime: Infinity,
    placeholderData: keepPreviousData,
  });
  const save = useMutation({
    mutationFn: (sent: string) =>
      unwrap(api.PUT('/v1/workspaces/{ws}/policy', { params: { path: { ws } }, ...asYaml(sent) })),
    onSuccess: (saved, sent) => {
      editing.saved(sent, saved.version);
      setSaveProblems(null);
      notifications.show({
        color: 'green',
        message: saved.changed ? `Policy version ${saved.version} in force` : 'No change: nothing saved',
      });
      void queryClient.invalidateQueries({ queryKey: ['policy', ws] });
      void queryClient.invalidateQueries({ queryKey: ['policy-versions', ws] });
      void queryClient.invalidateQueries({ queryKey: ['policy-validate', ws] });
    },
    onError: (error, sent) => setSaveProblems(problemsOf(sent, error)),
    meta: { shownInPage: (error) => problemsOf(text, error) !== null },
  });
  const typing = draft !== text || check.isFetching;
  // what the save said wins until the text changes; else what validation says of the text as it is
  const problems = saveProblems ?? (draft === text ? check.data?.problems : undefined) ?? [];
  const goTo = (line: number) => {
    const el = area.current;
    if (!el) return;
    const lines = text.split('\n');
    const start = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
    el.focus();
    el.setSelectionRange(start, start + (lines[line - 1]?.length ?? 0));
  };
  return (
    <Card withBorder component="section" aria-labelledby="editor-title">
      <Title order={2} size="h4" id="editor-title" mb="xs">
        Document
      </Title>
      <NewerVersion
        draft={editing}
        title={`Version ${version} is in force now`}
        load={`Load version ${version} instead`}
      />
      <Textarea
        ref={area}
        aria-label="Policy document (YAML)"
        value={text}
        onChange={(e) => {
          setText(e.currentTarget.value);
          setSaveProblems(null);
        }}
        autosize
        minRows={16}
        maxRows={40}
        styles={{ input: { fontFamily: 'var(--mantine-font-family-monospace)' } }}
        spellCheck={false}
        error={problems.length > 0 ? `${problems.length} problem${problems.length === 1 ? '' : 's'}` : undefined}
      />
      <div aria-live="polite">
        {problems.length > 0 ? (
          <List size="sm" mt="xs" aria-label="Problems">
            {problems.map((p, i) => (
              <List.Item key={i} c="red.9">
                {p.line !== null ? (
                  <Anchor component="button" type="button" size="sm" c="red.9" onClick={() => goTo(p.line!)}>
                    line {p.line}
                    {p.column !== undefined ? `, column ${p.column}` : ''}
                  </Anchor>
                ) : null}
                {p.line !== null ? ': ' : ''}
                {p.message}
              </List.Item>
            ))}
          </List>
        ) : check.data?.valid && !typing ? (
          <Text size="sm" mt="xs" c="dimmed">
            Valid: {check.data.valid.rules} rule{check.data.valid.rules === 1 ? '' : 's'}
            {check.data.valid.changed ? '' : ', the same as the version in force'}
          </Text>
        ) : null}
      </div>
      <Group mt="sm">
        <Button onClick={() => save.mutate(text)} loading={save.isPending}>
          Save as a new version
        </Button>
      </Group>
      <Replay ws={ws} text={text} />
    </Card>
  );
}

function Simulator({ ws }: { ws: string }) {
  const [server, setServer] = useState('');
  const [tool, setTool] = useState('');
  const [args, setArgs] = useState('{}');
  const [argsError, setArgsError] = useState<string | null>(null);
  const evaluate = useMutation({
    mutationFn: (parsed: Record<string, unknown>) =>
      unwrap(
        api.POST('/v1/workspaces/{ws}/policy/evaluate', {
          params: { path: { ws } },
          body: { server, tool, arguments: parsed },
        }),
      ),
  });
  return (
    <Card withBorder component="section" aria-labelledby="simulator-title">
      <Title order={2} size="h4" id="simulator-title" mb="xs">
        Simulator
      </Title>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          try {
            const parsed = JSON.parse(args) as unknown;
            if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('an object');
            setArgsError(null);
            evaluate.mutate(parsed as Record<string, unknown>);
          } catch {
            setArgsError('Arguments must be a JSON object');
          }
        }}
      >
        <Stack gap="xs">
          <Group grow>
            <TextInput label="Server" required value={server} onChange={(e) => setServer(e.currentTarget.value)} />
            <TextInput label="Tool" required value={tool} onChange={(e) => setTool(e.currentTarget.value)} />
          </Group>
          <Textarea
            label="Arguments (JSON)"
            value={args}
            onChange={(e) => setArgs(e.currentTarget.value)}
            error={argsError}
            styles={{ input: { fontFamily: 'var(--mantine-font-family-monospace)' } }}
          />
          <Button type="submit" loading={evaluate.isPending} w="fit-content">
            Evaluate
          </Button>
        </Stack>
      </form>
      {evaluate.data && (
        <Alert
          mt="sm"
          color={evaluate.data.decision === 'allow' ? 'green' : evaluate.data.decision === 'deny' ? 'red' : 'yellow'}
          title={`Decision: ${evaluate.data.decision}`}
          aria-live="polite"
        >
          <Text size="sm">
            {evaluate.data.reason === 'default' ? (
              "No rule matched: the workspace's default"
            ) : (
              <>
                Rule{' '}
                {evaluate.data.rules.map((r) => (
                  <Code key={r}>{r}</Code>
                ))}
              </>
            )}
            {evaluate.data.approval_route ? ` (approval route ${evaluate.data.approval_route})` : ''}
          </Text>
        </Alert>
      )}
    </Card>
  );
}

function Versions({ ws, current }: { ws: string; current: number }) {
  const { query, items } = usePagedList(['policy-versions', ws], (cursor) =>
    unwrap(api.GET('/v1/workspaces/{ws}/policy/versions', { params: { path: { ws }, query: { cursor } } })),
  );
  const [restoring, setRestoring] = useState<number | null>(null);
  const [comparing, setComparing] = useState<number | null>(null);
  const queryClient = useQueryClient();
  const rollback = useMutation({
    mutationFn: (version: number) =>
      unwrap(api.POST('/v1/workspaces/{ws}/policy/rollback', { params: { path: { ws } }, body: { version } })),
    onSuccess: (saved) => {
      setRestoring(null);
      notifications.show({ color: 'green', message: `Version ${saved.version} in force` });
      void queryClient.invalidateQueries({ queryKey: ['policy', ws] });
      void queryClient.invalidateQueries({ queryKey: ['policy-versions', ws] });
    },
  });
  return (
    <Card withBorder component="section" aria-labelledby="versions-title">
      <Title order={2} size="h4" id="versions-title" mb="xs">
        Versions
      </Title>
      <PagedList
        query={query}
        count={items.length}
        what="versions"
        empty={
          <EmptyState title="No saved version yet">
            Each save keeps a version you can compare and roll back to.
          </EmptyState>
        }
      >
        <Table>
          <Table.Tbody>
            {items.map((v) => (
              <Table.Tr key={v.version}>
                <Table.Td>
                  <Text size="sm">
                    <b>v{v.version}</b> · {v.rules} rule{v.rules === 1 ? '' : 's'}
                  </Text>
                  <Text size="xs" c="dimmed">
                    {when(v.created_at)}
                  </Text>
                </Table.Td>
                <Table.Td style={{ whiteSpace: 'nowrap' }} ta="right">
                  {v.version === current ? (
                    <Badge variant="light">in force</Badge>
                  ) : (
                    <Group gap={4} wrap="nowrap" justify="flex-end">
                      <Button
                        size="xs"
                        variant="subtle"
                        aria-label={`Compare v${v.version} with v${current}`}
                        onClick={() => setComparing(v.version)}
                      >
                        Compare
                      </Button>
                      <Button
                        size="xs"
                        variant="subtle"
                        aria-label={`Roll back to v${v.version}`}
                        onClick={() => setRestoring(v.version)}
                      >
                        Roll back
                      </Button>
                    </Group>
                  )}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </PagedList>
      <Modal
        opened={restoring !== null}
        onClose={() => setRestoring(null)}
        title={`Put version ${restoring ?? ''} back in force?`}
      >
        <Group justify="flex-end">
          <Button variant="default" onClick={() => setRestoring(null)}>
            Cancel
          </Button>
          <Button loading={rollback.isPending} onClick={() => restoring && rollback.mutate(restoring)}>
            Roll back
          </Button>
        </Group>
      </Modal>
      <Modal
        opened={comparing !== null}
        onClose={() => setComparing(null)}
        title={`Version ${comparing ?? ''} and version ${current} (in force)`}
        size="80rem"
      >
        {comparing !== null && <VersionDiff ws={ws} from={comparing} to={current} />}
      </Modal>
    </Card>
  );
}

/** Two versions' documents as YAML, side by side: both fetched at once. */
function VersionDiff({ ws, from, to }: { ws: string; from: number; to: number }) {
  const [before, after] = useQueries({
    queries: [from, to].map((version) => ({
      queryKey: ['policy-version', ws, version],
      queryFn: () =>
        unwrap(
          api.GET('/v1/workspaces/{ws}/policy/versions/{version}', {
            params: { path: { ws, version } },
          }),
        ),
      staleTime: Infinity,
    })),
  });
  const failed = before?.error ?? after?.error;
  if (failed) return <ErrorState error={failed} />;
  if (!before?.data || !after?.data) return <Loading what="both versions" />;
  return (
    <SideBySide
      before={stringify(before.data.document)}
      after={stringify(after.data.document)}
      beforeLabel={`Version ${from}`}
      afterLabel={`Version ${to}`}
    />
  );
}

const MINUTE = 60_000;
const DAY = 86_400_000;
/** How far back a replay reaches; the API takes at most 30 days. */
const SPANS = [
  { value: '1h', label: 'the last hour', ms: 60 * MINUTE },
  { value: '1d', label: 'the last day', ms: DAY },
  { value: '7d', label: 'the last 7 days', ms: 7 * DAY },
  // a minute short of the limit, so the request is within it when the server reads its clock
  { value: '30d', label: 'the last 30 days', ms: 30 * DAY - MINUTE },
];

interface ReplayRun {
  document: unknown;
  since: string;
  /** a new run each time the button is pressed, even for the same draft */
  run: number;
}

/**
 * Before publishing: the draft in the editor decided again over the
 * workspace's recorded calls (`POST …/policy/replay`, on the server, paged),
 * listing each call it would decide differently and the rule responsible.
 */
function Replay({ ws, text }: { ws: string; text: string }) {
  const [span, setSpan] = useState('7d');
  const [run, setRun] = useState<ReplayRun | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  return (
    <Stack component="section" aria-labelledby="replay-title" gap={0} mt="lg">
      <Divider mb="md" />
      <Title order={3} size="h5" id="replay-title" mb="xs">
        Replay against recorded calls
      </Title>
      <Text size="sm" c="dimmed" mb="sm">
        Run the document above, unsaved, against the calls this workspace recorded, and see every call it would decide
        differently.
      </Text>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          let document: unknown;
          try {
            document = parse(text);
          } catch {
            setProblem('The document is not valid YAML: fix the problems above first');
            return;
          }
          setProblem(null);
          const ms = SPANS.find((s) => s.value === span)!.ms;
          setRun({ document, since: new Date(Date.now() - ms).toISOString(), run: (run?.run ?? 0) + 1 });
        }}
      >
        <Group align="flex-end">
          <Select
            label="Calls recorded in"
            data={SPANS.map(({ value, label }) => ({ value, label }))}
            value={span}
            allowDeselect={false}
            onChange={(value) => value && setSpan(value)}
            w={200}
          />
          <Button type="submit">Replay the draft</Button>
        </Group>
      </form>
      {problem && (
        <Text size="sm" c="red.9" mt="xs" role="alert">
          {problem}
        </Text>
      )}
      {run && <ReplayResults ws={ws} run={run} />}
    </Stack>
  );
}

function ReplayResults({ ws, run }: { ws: string; run: ReplayRun }) {
  const query = useInfiniteQuery({
    queryKey: ['policy-replay', ws, run.run],
    queryFn: ({ pageParam }) =>
      unwrap(
        api.POST('/v1/workspaces/{ws}/policy/replay', {
          params: { path: { ws }, query: { cursor: pageParam } },
          body: { document: run.document as never, since: run.since },
        }),
      ),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (last) => last.next_cursor ?? undefined,
    staleTime: Infinity,
    retry: false,
  });
  const pages = query.data?.pages ?? [];
  const items = pages.flatMap((p) => p.items);
  const examined = pages.reduce((n, p) => n + p.examined, 0);
  const until = pages[0]?.until;
  return (
    <Stack mt="md" gap="xs" aria-live="polite">
      {query.isPending ? (
        <Loading what="the replay" />
      ) : query.error ? (
        <ErrorState error={query.error} />
      ) : (
        <>
          <Text size="sm" role="status">
            {items.length === 0
              ? `No call decided differently among ${examined} recorded call${examined === 1 ? '' : 's'}`
              : `${items.length} call${items.length === 1 ? '' : 's'} decided differently among ${examined} recorded`}{' '}
            from {when(run.since)} to {when(until)}
            {query.hasNextPage ? ' so far: more recorded calls remain' : ''}.
          </Text>
          {items.length > 0 && (
            <Table aria-label="Calls decided differently">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Call</Table.Th>
                  <Table.Th>Change</Table.Th>
                  <Table.Th>Responsible</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {items.map((item) => (
                  <Table.Tr key={item.id}>
                    <Table.Td>
                      <Text size="sm">
                        {item.server} → {item.tool}
                      </Text>
                      <Text size="xs" c="dimmed" lineClamp={2} style={{ wordBreak: 'break-all' }}>
                        {JSON.stringify(item.arguments)}
                      </Text>
                      <Text size="xs" c="dimmed">
                        {when(item.occurred_at)}
                        {item.actor ? ` · ${item.actor}` : ''}
                      </Text>
                    </Table.Td>
                    <Table.Td style={{ whiteSpace: 'nowrap' }}>
                      <Badge variant="light" color={DECISION_COLOR[item.recorded.decision]}>
                        {item.recorded.decision}
                      </Badge>{' '}
                      →{' '}
                      <Badge variant="light" color={DECISION_COLOR[item.draft.decision]}>
                        {item.draft.decision}
                      </Badge>
                    </Table.Td>
                    <Table.Td>
                      {item.draft.reason === 'default' ? (
                        <Text size="sm">the default</Text>
                      ) : (
                        item.draft.rules.map((r) => <Code key={r}>{r}</Code>)
                      )}
                      {item.recorded.rules.length > 0 && (
                        <Text size="xs" c="dimmed">
                          was {item.recorded.rules.join(', ')}
                        </Text>
                      )}
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          )}
          {query.hasNextPage && (
            <Button
              variant="default"
              w="fit-content"
              loading={query.isFetchingNextPage}
              onClick={() => void query.fetchNextPage()}
            >
              Replay more recorded calls
            </Button>
          )}
        </>
      )}
    </Stack>
  );
}

const DECISION_COLOR: Record<string, string> = { allow: 'green', deny: 'red', approval: 'yellow' };
