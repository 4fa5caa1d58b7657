import {
  Alert,
  Badge,
  Button,
  Group,
  Modal,
  Progress,
  Select,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { notifications } from '@mantine/notifications';
import { useMutation, useQueries, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { SideBySide } from '../app/diff';
import { useMe } from '../app/session';
import { ErrorState, Loading, PageTitle, when } from '../app/ui';
import { AddServer } from './Catalog';

/** One catalog server: its versions side by side, where it is assigned (and rolling out), the kill switch. */
export default function CatalogServer() {
  const name = useParams().name!;
  const server = useQuery({
    queryKey: ['catalog', name],
    queryFn: () => unwrap(api.GET('/v1/catalog/servers/{name}', { params: { path: { name } } })),
  });
  const [publishing, publish] = useDisclosure();
  if (server.isPending) return <Loading what={name} />;
  if (server.error) return <ErrorState error={server.error} retry={() => void server.refetch()} />;
  const s = server.data;
  return (
    <>
      <PageTitle
        actions={
          <Group>
            <Button variant="default" onClick={publish.open}>
              New version
            </Button>
            <KillSwitch name={name} enabled={s.enabled} />
          </Group>
        }
      >
        {name} {s.enabled ? <Badge color="green">enabled</Badge> : <Badge color="red">disabled</Badge>}
      </PageTitle>
      {!s.enabled && (
        <Alert color="red" title="Disabled in every workspace" mb="md">
          {s.disabled_reason} ({when(s.disabled_at)})
        </Alert>
      )}
      <Stack gap="xl">
        <VersionDiff versions={s.versions} />
        <Assignments name={name} versions={s.versions.map((v) => v.version)} />
      </Stack>
      <Modal opened={publishing} onClose={publish.close} title={`New version of ${name}`}>
        <AddServer name={name} onDone={publish.close} />
      </Modal>
    </>
  );
}

type Version = { version: string; definition: Record<string, unknown> };

function VersionDiff({ versions }: { versions: Version[] }) {
  const names = versions.map((v) => v.version);
  // the API lists versions newest first: the latest beside the one before it
  const [left, setLeft] = useState<string | null>(names[1] ?? names[0] ?? null);
  const [right, setRight] = useState<string | null>(names[0] ?? null);
  const text = (version: string | null) =>
    JSON.stringify(versions.find((v) => v.version === version)?.definition ?? {}, null, 2) + '\n';
  return (
    <section aria-labelledby="versions-title">
      <Title order={2} size="h4" id="versions-title" mb="xs">
        Versions
      </Title>
      <Group mb="xs">
        <Select label="From" data={names} value={left} onChange={setLeft} allowDeselect={false} w={160} />
        <Select label="To" data={names} value={right} onChange={setRight} allowDeselect={false} w={160} />
      </Group>
      <SideBySide
        before={text(left)}
        after={text(right)}
        beforeLabel={`Definition of ${left ?? ''}`}
        afterLabel={`Definition of ${right ?? ''}`}
      />
    </section>
  );
}

function Assignments({ name, versions }: { name: string; versions: string[] }) {
  const me = useMe();
  const workspaces = me.data?.workspaces ?? [];
  const queryClient = useQueryClient();
  // every workspace's assignment at once, in parallel
  const assigned = useQueries({
    queries: workspaces.map((w) => ({
      queryKey: ['assignments', w.slug],
      queryFn: () =>
        unwrap(api.GET('/v1/workspaces/{ws}/servers', { params: { path: { ws: w.slug }, query: { limit: 200 } } })),
    })),
  });
  const [ws, setWs] = useState<string | null>(null);
  const [version, setVersion] = useState<string | null>(versions[0] ?? null);
  const assign = useMutation({
    mutationFn: () =>
      unwrap(
        api.PUT('/v1/workspaces/{ws}/servers/{name}', {
          params: { path: { ws: ws!, name } },
          body: { version: version! },
        }),
      ),
    onSuccess: () => {
      notifications.show({ color: 'green', message: `${name} ${version} assigned to ${ws}` });
      void queryClient.invalidateQueries({ queryKey: ['assignments', ws] });
    },
  });
  return (
    <section aria-labelledby="assignments-title">
      <Title order={2} size="h4" id="assignments-title" mb="xs">
        Workspaces
      </Title>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (ws && version) assign.mutate();
        }}
      >
        <Group align="end" mb="md">
          <Select
            label="Workspace"
            data={workspaces.map((w) => ({ value: w.slug, label: w.name }))}
            value={ws}
            onChange={setWs}
            w={200}
          />
          <Select
            label="Pinned version"
            data={versions}
            value={version}
            onChange={setVersion}
            allowDeselect={false}
            w={160}
          />
          <Button type="submit" disabled={!ws || !version} loading={assign.isPending}>
            Assign
          </Button>
        </Group>
      </form>
      <Table>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Workspace</Table.Th>
            <Table.Th>Pinned</Table.Th>
            <Table.Th>Rollout</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {workspaces.map((w, i) => {
            const entry = assigned[i]?.data?.items.find((a) => a.server === name);
            return (
              <Table.Tr key={w.slug}>
                <Table.Td>{w.name}</Table.Td>
                <Table.Td>{assigned[i]?.isPending ? '…' : (entry?.version ?? 'not assigned')}</Table.Td>
                <Table.Td>
                  {entry?.rollout ? (
                    <Stack gap={2}>
                      <Text size="xs">
                        {entry.rollout.version} to {entry.rollout.percent}% of gateways
                        {entry.rollout.groups.length > 0 ? `, groups ${entry.rollout.groups.join(', ')}` : ''}
                      </Text>
                      <Progress
                        value={entry.rollout.percent}
                        aria-label={`Rollout of ${entry.rollout.version} in ${w.name}`}
                      />
                    </Stack>
                  ) : (
                    '—'
                  )}
                </Table.Td>
              </Table.Tr>
            );
          })}
        </Table.Tbody>
      </Table>
    </section>
  );
}

function KillSwitch({ name, enabled }: { name: string; enabled: boolean }) {
  const [opened, { open, close }] = useDisclosure();
  const [reason, setReason] = useState('');
  const queryClient = useQueryClient();
  const toggle = useMutation({
    mutationFn: () =>
      unwrap(
        api.PUT('/v1/catalog/servers/{name}/status', {
          params: { path: { name } },
          body: enabled ? { enabled: false, reason } : { enabled: true },
        }),
      ),
    onSuccess: () => {
      close();
      void queryClient.invalidateQueries({ queryKey: ['catalog'] });
    },
  });
  return (
    <>
      <Button color={enabled ? 'red' : 'green'} onClick={open}>
        {enabled ? 'Disable everywhere' : 'Enable again'}
      </Button>
      <Modal
        opened={opened}
        onClose={close}
        title={enabled ? `Disable ${name} in every workspace?` : `Enable ${name} again?`}
      >
        <form
          onSubmit={(event) => {
            event.preventDefault();
            toggle.mutate();
          }}
        >
          <Stack>
            {enabled && (
              <TextInput
                label="Reason"
                description="Shown to everyone who meets the disabled server"
                required
                value={reason}
                onChange={(e) => setReason(e.currentTarget.value)}
                data-autofocus
              />
            )}
            <Group justify="flex-end">
              <Button variant="default" onClick={close}>
                Cancel
              </Button>
              <Button type="submit" color={enabled ? 'red' : 'green'} loading={toggle.isPending}>
                {enabled ? 'Disable' : 'Enable'}
              </Button>
            </Group>
          </Stack>
        </form>
      </Modal>
    </>
  );
}
