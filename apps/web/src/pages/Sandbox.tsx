import {
  Anchor,
  Badge,
  Breadcrumbs,
  Button,
  Card,
  Code,
  Grid,
  Group,
  Stack,
  Table,
  Tabs,
  Text,
  Title,
  UnstyledButton,
} from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { Link, useParams, useSearchParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { PatchSideBySide } from '../app/diff';
import { usePagedList } from '../app/paging';
import { EmptyState, ErrorState, Loading, PagedList, PageTitle, when } from '../app/ui';

interface Snapshot {
  sha: string;
  trigger: string;
  message: string;
  files: { path: string; status: string }[];
  session: string | null;
  author: string;
  created_at: string;
}

/**
 * One sandbox: its snapshot history as commits (each one's change side by
 * side, the tool call that made it and the agent session behind it), its
 * files at any snapshot, and the bundle of the whole history. The tab, the
 * snapshot and the file are in the address, so a link shows the same view.
 */
export default function Sandbox() {
  const { ws, name } = useParams() as { ws: string; name: string };
  const [search, setSearch] = useSearchParams();
  const tab = search.get('tab') === 'files' ? 'files' : 'history';
  const sandbox = useQuery({
    queryKey: ['sandbox', ws, name],
    queryFn: () => unwrap(api.GET('/v1/workspaces/{ws}/sandboxes/{name}', { params: { path: { ws, name } } })),
  });
  const set = (changes: Record<string, string | null>) =>
    setSearch((current) => {
      const next = new URLSearchParams(current);
      for (const [key, value] of Object.entries(changes)) {
        if (value === null) next.delete(key);
        else next.set(key, value);
      }
      return next;
    });
  if (sandbox.error) return <ErrorState error={sandbox.error} retry={() => void sandbox.refetch()} />;
  return (
    <>
      <PageTitle
        actions={
          <Button
            component="a"
            href={`/v1/workspaces/${encodeURIComponent(ws)}/sandboxes/${encodeURIComponent(name)}/bundle`}
            download={`${name}.bundle`}
            variant="default"
          >
            Download bundle
          </Button>
        }
      >
        Sandbox {name}
      </PageTitle>
      {sandbox.data && (
        <Group gap="xs" mb="md">
          <Badge variant="light">network {sandbox.data.network}</Badge>
          <Badge variant="light">source {sandbox.data.source}</Badge>
          <Text size="sm" c="dimmed">
            made by {sandbox.data.created_by} {when(sandbox.data.created_at)} · last used{' '}
            {when(sandbox.data.last_used_at)} ·{' '}
            <Anchor component={Link} to={`/workspaces/${ws}/sandboxes`} underline="always">
              all sandboxes
            </Anchor>
          </Text>
        </Group>
      )}
      <Tabs value={tab} onChange={(value) => set({ tab: value === 'files' ? 'files' : null })} keepMounted={false}>
        <Tabs.List mb="md">
          <Tabs.Tab value="history">History</Tabs.Tab>
          <Tabs.Tab value="files">Files</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="history">
          <History
            ws={ws}
            name={name}
            selected={search.get('sha')}
            select={(sha) => set({ sha })}
            browse={(sha) => set({ tab: 'files', at: sha, path: null, file: null })}
          />
        </Tabs.Panel>
        <Tabs.Panel value="files">
          <Files
            ws={ws}
            name={name}
            at={search.get('at')}
            dir={search.get('path') ?? ''}
            file={search.get('file')}
            open={(changes) => set(changes)}
          />
        </Tabs.Panel>
      </Tabs>
    </>
  );
}

function History({
  ws,
  name,
  selected,
  select,
  browse,
}: {
  ws: string;
  name: string;
  selected: string | null;
  select: (sha: string) => void;
  browse: (sha: string) => void;
}) {
  const { query, items } = usePagedList(['snapshots', ws, name], (cursor) =>
    unwrap(
      api.GET('/v1/workspaces/{ws}/sandboxes/{name}/snapshots', { params: { path: { ws, name }, query: { cursor } } }),
    ),
  );
  const current = items.find((s) => s.sha === selected) ?? items[0] ?? null;
  return (
    <Grid>
      <Grid.Col span={{ base: 12, md: 4 }}>
        <PagedList
          query={query}
          count={items.length}
          what="snapshots"
          empty={
            <EmptyState title="No snapshot yet">
              Each write, patch or bash that changes the files is committed here.
            </EmptyState>
          }
        >
          <Table highlightOnHover aria-label="Snapshots">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Snapshot</Table.Th>
                <Table.Th>When</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {items.map((s) => (
                <Table.Tr key={s.sha} bg={s.sha === current?.sha ? 'var(--mantine-color-blue-light)' : undefined}>
                  <Table.Td>
                    <UnstyledButton onClick={() => select(s.sha)} aria-pressed={s.sha === current?.sha}>
                      <Text size="sm" ff="monospace">
                        {s.message}
                      </Text>
                    </UnstyledButton>
                    <Text size="xs" c="dimmed">
                      {s.sha.slice(0, 10)} · {s.files.length} file{s.files.length === 1 ? '' : 's'}
                    </Text>
                  </Table.Td>
                  <Table.Td>{when(s.created_at)}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </PagedList>
      </Grid.Col>
      <Grid.Col span={{ base: 12, md: 8 }}>
        {current && <SnapshotView ws={ws} name={name} snapshot={current} browse={browse} />}
      </Grid.Col>
    </Grid>
  );
}

function SnapshotView({
  ws,
  name,
  snapshot: s,
  browse,
}: {
  ws: string;
  name: string;
  snapshot: Snapshot;
  browse: (sha: string) => void;
}) {
  const diff = useQuery({
    queryKey: ['snapshot-diff', ws, name, s.sha],
    // text/x-diff: read as text (a refusal is still a problem document)
    queryFn: () =>
      unwrap(
        api.GET('/v1/workspaces/{ws}/sandboxes/{name}/snapshots/{sha}/diff', {
          params: { path: { ws, name, sha: s.sha } },
          parseAs: 'text',
        }),
      ) as Promise<string>,
    staleTime: Infinity,
  });
  return (
    <Card withBorder component="section" aria-labelledby="snapshot-title">
      <Stack>
        <Group justify="space-between">
          <Title order={2} size="h4" id="snapshot-title" ff="monospace">
            {s.message}
          </Title>
          <Button variant="default" size="xs" onClick={() => browse(s.sha)}>
            Browse files at this snapshot
          </Button>
        </Group>
        <Text size="sm" aria-label="Made by">
          Made by the tool call <Code>{s.trigger}</Code> of {s.author.replace(/ <[^>]*>$/, '')}
          {s.session ? (
            <>
              {' '}
              in agent session{' '}
              <Anchor component={Link} to={`/workspaces/${ws}/sessions/${s.session}`} underline="always">
                {s.session.slice(0, 8)}
              </Anchor>
            </>
          ) : (
            ', outside an agent session'
          )}
          , {when(s.created_at)}. Commit <Code>{s.sha}</Code>
        </Text>
        {diff.isPending ? (
          <Loading what="the change" />
        ) : diff.error ? (
          <ErrorState error={diff.error} retry={() => void diff.refetch()} />
        ) : (
          <PatchSideBySide patch={diff.data} />
        )}
      </Stack>
    </Card>
  );
}

const KIND_LABEL: Record<string, string> = {
  directory: 'directory',
  file: 'file',
  executable: 'executable',
  symlink: 'link',
  submodule: 'submodule',
};

function Files({
  ws,
  name,
  at,
  dir,
  file,
  open,
}: {
  ws: string;
  name: string;
  at: string | null;
  dir: string;
  file: string | null;
  open: (changes: Record<string, string | null>) => void;
}) {
  const { query, items } = usePagedList(['sandbox-files', ws, name, at, dir], (cursor) =>
    unwrap(
      api.GET('/v1/workspaces/{ws}/sandboxes/{name}/files', {
        params: { path: { ws, name }, query: { path: dir, cursor, ...(at ? { at } : {}) } },
      }),
    ),
  );
  // the listing's page says which commit it read besides its items
  const commit = (query.data?.pages[0] as { commit?: string | null } | undefined)?.commit ?? null;
  const parts = dir === '' ? [] : dir.split('/');
  return (
    <Grid>
      <Grid.Col span={{ base: 12, md: 5 }}>
        <Stack gap="xs">
          <Text size="sm" c="dimmed">
            {at ? (
              <>
                At snapshot <Code>{at.slice(0, 10)}</Code> ·{' '}
                <Anchor
                  component="button"
                  type="button"
                  size="sm"
                  underline="always"
                  onClick={() => open({ at: null, file: null })}
                >
                  the newest
                </Anchor>
              </>
            ) : commit ? (
              <>
                The newest snapshot, <Code>{commit.slice(0, 10)}</Code>
              </>
            ) : (
              'As the snapshots hold them'
            )}
          </Text>
          <Breadcrumbs aria-label="Directory">
            {['/src', ...parts].map((part, i) => (
              <Anchor
                key={i}
                component="button"
                type="button"
                size="sm"
                onClick={() => open({ path: i === 0 ? null : parts.slice(0, i).join('/'), file: null })}
              >
                {part}
              </Anchor>
            ))}
          </Breadcrumbs>
          <PagedList
            query={query}
            count={items.length}
            what="files"
            empty={<EmptyState title="No files">Nothing was committed here yet.</EmptyState>}
          >
            <Table aria-label="Files">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Name</Table.Th>
                  <Table.Th>Kind</Table.Th>
                  <Table.Th ta="right">Size</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {items.map((e) => (
                  <Table.Tr key={e.path}>
                    <Table.Td>
                      {e.kind === 'directory' || e.kind === 'submodule' ? (
                        <Anchor
                          component="button"
                          type="button"
                          ff="monospace"
                          size="sm"
                          disabled={e.kind === 'submodule'}
                          onClick={() => open({ path: e.path, file: null })}
                        >
                          {e.name}/
                        </Anchor>
                      ) : (
                        <Anchor
                          component="button"
                          type="button"
                          ff="monospace"
                          size="sm"
                          aria-current={e.path === file ? 'true' : undefined}
                          fw={e.path === file ? 700 : undefined}
                          onClick={() => open({ file: e.path })}
                        >
                          {e.name}
                        </Anchor>
                      )}
                    </Table.Td>
                    <Table.Td>{KIND_LABEL[e.kind]}</Table.Td>
                    <Table.Td ta="right">{e.size ?? ''}</Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </PagedList>
        </Stack>
      </Grid.Col>
      <Grid.Col span={{ base: 12, md: 7 }}>
        {file ? (
          <FileText ws={ws} name={name} at={at} path={file} />
        ) : (
          <EmptyState title="Pick a file">Its text as the snapshot holds it.</EmptyState>
        )}
      </Grid.Col>
    </Grid>
  );
}

function FileText({ ws, name, at, path }: { ws: string; name: string; at: string | null; path: string }) {
  const file = useQuery({
    queryKey: ['sandbox-file', ws, name, at, path],
    queryFn: () =>
      unwrap(
        api.GET('/v1/workspaces/{ws}/sandboxes/{name}/file', {
          params: { path: { ws, name }, query: { path, ...(at ? { at } : {}) } },
        }),
      ),
  });
  if (file.isPending) return <Loading what={path} />;
  if (file.error) return <ErrorState error={file.error} retry={() => void file.refetch()} />;
  const f = file.data;
  return (
    <Card withBorder component="figure" m={0} aria-label={`File ${f.path}`}>
      <Group justify="space-between" mb="xs">
        <Text fw={600} ff="monospace" size="sm">
          {f.path}
          {f.kind === 'symlink' ? ' (a link)' : ''}
        </Text>
        <Text size="xs" c="dimmed">
          {f.size} bytes
        </Text>
      </Group>
      {f.text !== null ? (
        <pre className="console-pre">{f.kind === 'symlink' ? `→ ${f.text}` : f.text}</pre>
      ) : (
        <Text size="sm" c="dimmed">
          {f.too_large ? 'Over 1 MiB: not shown here; the bundle has it.' : 'A binary file: its bytes are not shown.'}
        </Text>
      )}
    </Card>
  );
}
