import {
  Alert,
  Badge,
  Button,
  Card,
  Code,
  Grid,
  Group,
  List,
  Modal,
  Stack,
  Table,
  Text,
  Textarea,
  TextInput,
  Title,
} from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { useParams } from 'react-router';
import { isMap, isSeq, LineCounter, parseDocument, stringify } from 'yaml';
import { api, ApiProblem, unwrap } from '../api/client';
import { usePagedList } from '../app/paging';
import { ErrorState, Loading, MorePages, PageTitle, when } from '../app/ui';

interface Located {
  line: number | null;
  message: string;
}

/** Where in the text a problem of the API is: its own "line N" for syntax, else the node its `body.rules[2].x` path names. */
export function locate(text: string, problems: { path?: string; message?: string }[]): Located[] {
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter });
  return problems.map((p) => {
    const message = `${p.path ? `${p.path}: ` : ''}${p.message ?? ''}`;
    const syntax = /^line (\d+)/.exec(p.message ?? '');
    if (syntax) return { line: Number(syntax[1]), message };
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

function Editor({ ws, initial, version }: { ws: string; initial: string; version: number }) {
  const [text, setText] = useState(initial);
  const [problems, setProblems] = useState<Located[]>([]);
  const queryClient = useQueryClient();
  useEffect(() => setText(initial), [initial, version]);
  const save = useMutation({
    mutationFn: () =>
      unwrap(
        api.PUT('/v1/workspaces/{ws}/policy', {
          params: { path: { ws } },
          // YAML as written: the server parses it and names each problem's line or field
          body: text as never,
          bodySerializer: (body: unknown) => body as string,
          headers: { 'content-type': 'application/yaml' },
        }),
      ),
    onSuccess: (saved) => {
      setProblems([]);
      notifications.show({ color: 'green', message: `Policy version ${saved.version} in force` });
      void queryClient.invalidateQueries({ queryKey: ['policy', ws] });
      void queryClient.invalidateQueries({ queryKey: ['policy-versions', ws] });
    },
    onError: (error) => {
      const listed = error instanceof ApiProblem ? (error.problem.errors ?? []) : [];
      setProblems(listed.length > 0 ? locate(text, listed) : []);
    },
  });
  return (
    <Card withBorder component="section" aria-labelledby="editor-title">
      <Title order={2} size="h4" id="editor-title" mb="xs">
        Document
      </Title>
      <Textarea
        aria-label="Policy document (YAML)"
        value={text}
        onChange={(e) => setText(e.currentTarget.value)}
        autosize
        minRows={16}
        maxRows={40}
        styles={{ input: { fontFamily: 'var(--mantine-font-family-monospace)' } }}
        spellCheck={false}
        error={problems.length > 0 ? `${problems.length} problem${problems.length === 1 ? '' : 's'}` : undefined}
      />
      {problems.length > 0 && (
        <List size="sm" mt="xs" aria-label="Problems">
          {problems.map((p, i) => (
            <List.Item key={i} c="red">
              {p.line !== null ? `line ${p.line}: ` : ''}
              {p.message}
            </List.Item>
          ))}
        </List>
      )}
      <Group mt="sm">
        <Button onClick={() => save.mutate()} loading={save.isPending}>
          Save as a new version
        </Button>
      </Group>
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
      {query.error ? (
        <ErrorState error={query.error} />
      ) : (
        <Table>
          <Table.Tbody>
            {items.map((v) => (
              <Table.Tr key={v.version}>
                <Table.Td>v{v.version}</Table.Td>
                <Table.Td>{v.rules} rules</Table.Td>
                <Table.Td>{when(v.created_at)}</Table.Td>
                <Table.Td>
                  {v.version === current ? (
                    <Badge>in force</Badge>
                  ) : (
                    <Button size="xs" variant="subtle" onClick={() => setRestoring(v.version)}>
                      Roll back to v{v.version}
                    </Button>
                  )}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      <MorePages query={query} />
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
    </Card>
  );
}
