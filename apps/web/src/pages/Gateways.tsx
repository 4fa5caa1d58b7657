import { Alert, Badge, Button, Code, Group, Modal, Select, Stack, Table, TagsInput, Text } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { WhenBy } from '../app/cells';
import { Confirm, Revocable, ShownOnce } from '../app/dialogs';
import { usePagedList } from '../app/paging';
import { EmptyState, PagedList, PageTitle, when } from '../app/ui';

const LIFETIMES = [
  { value: '900', label: '15 minutes' },
  { value: '3600', label: '1 hour' },
  { value: '86400', label: '1 day' },
  { value: '604800', label: '7 days' },
];

/** How long a replaced token keeps working: the server takes 0 to 7 days, and defaults to an hour. */
const GRACE = [{ value: '0', label: 'Not at all: refused at once' }, ...LIFETIMES];

/** The new token's lifetime: the server takes 60 s to 366 days, or none. */
const EXPIRIES = [
  { value: 'never', label: 'Never: until rotated or revoked' },
  { value: '2592000', label: '30 days' },
  { value: '7776000', label: '90 days' },
  { value: '31536000', label: '1 year' },
];

/**
 * The workspace's local gateways: enrolment codes (each shown once), the
 * gateways with who enrolled them, when each was last seen and its token's
 * lifetime; a token rotated (the new one shown once) or the gateway revoked.
 */
export default function Gateways() {
  const ws = useParams().ws!;
  const { query, items } = usePagedList(['gateways', ws], (cursor) =>
    unwrap(api.GET('/v1/workspaces/{ws}/gateways', { params: { path: { ws }, query: { cursor } } })),
  );
  const [enrolling, { open, close }] = useDisclosure();
  const [revoking, setRevoking] = useState<{ id: string; name: string } | null>(null);
  const [rotating, setRotating] = useState<{ id: string; name: string } | null>(null);
  const queryClient = useQueryClient();
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['gateways', ws] });
  const revoke = useMutation({
    mutationFn: (id: string) =>
      unwrap(api.DELETE('/v1/workspaces/{ws}/gateways/{id}', { params: { path: { ws, id } } })),
    onSuccess: () => {
      setRevoking(null);
      refresh();
    },
  });
  return (
    <>
      <PageTitle actions={<Button onClick={open}>New enrolment code</Button>}>Gateways</PageTitle>
      <PagedList
        query={query}
        count={items.length}
        what="gateways"
        empty={
          <EmptyState title="No gateway enrolled">
            A gateway on a developer&apos;s machine enrols with a one-time code made here.
          </EmptyState>
        }
      >
        <Table aria-label="Gateways">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Groups</Table.Th>
              <Table.Th>Token</Table.Th>
              <Table.Th>Enrolled</Table.Th>
              <Table.Th>Last contact</Table.Th>
              <Table.Th>State</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {items.map((g) => (
              <Table.Tr key={g.id}>
                <Table.Td>{g.name}</Table.Td>
                <Table.Td>
                  <Group gap={4}>
                    {g.groups.length === 0
                      ? '—'
                      : g.groups.map((group) => (
                          <Badge key={group} variant="light">
                            {group}
                          </Badge>
                        ))}
                  </Group>
                </Table.Td>
                <Table.Td>
                  <Code>{g.prefix}…</Code>
                  <TokenLifetime expiresAt={g.token_expires_at} previousUntil={g.previous_token_valid_until} />
                </Table.Td>
                <Table.Td>
                  <WhenBy at={g.enrolled_at} by={g.enrolled_by} />
                </Table.Td>
                <Table.Td>{g.last_seen_at ? when(g.last_seen_at) : 'never'}</Table.Td>
                <Table.Td>
                  <Group gap={4} wrap="nowrap">
                    {g.revoked_at === null && (
                      <Button
                        variant="subtle"
                        size="xs"
                        aria-label={`Rotate token of ${g.name}`}
                        onClick={() => setRotating({ id: g.id, name: g.name })}
                      >
                        Rotate token
                      </Button>
                    )}
                    <Revocable
                      revoked={g.revoked_at !== null}
                      name={g.name}
                      onRevoke={() => setRevoking({ id: g.id, name: g.name })}
                    />
                  </Group>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </PagedList>
      <Modal opened={enrolling} onClose={close} title="New enrolment code">
        <EnrolmentCode ws={ws} onDone={close} />
      </Modal>
      <Modal
        opened={rotating !== null}
        onClose={() => setRotating(null)}
        title={`Rotate the token of ${rotating?.name ?? ''}`}
      >
        {rotating && <RotateToken ws={ws} gateway={rotating.id} onRotated={refresh} onDone={() => setRotating(null)} />}
      </Modal>
      <Confirm
        opened={revoking !== null}
        onClose={() => setRevoking(null)}
        title="Revoke gateway"
        action="Revoke"
        color="red"
        loading={revoke.isPending}
        onConfirm={() => revoking && revoke.mutate(revoking.id)}
      >
        Revoke “{revoking?.name}”? Its token is refused on every replica at once.
      </Confirm>
    </>
  );
}

/** Under a token's prefix: when it expires, and until when the token it replaced still works. */
function TokenLifetime({ expiresAt, previousUntil }: { expiresAt: string | null; previousUntil: string | null }) {
  return (
    <>
      <Text size="xs" c="dimmed">
        {expiresAt ? `expires ${when(expiresAt)}` : 'no expiry'}
      </Text>
      {previousUntil && (
        <Text size="xs" c="dimmed">
          {new Date(previousUntil).getTime() > Date.now()
            ? `the old token works until ${when(previousUntil)}`
            : `the old token stopped ${when(previousUntil)}`}
        </Text>
      )}
    </>
  );
}

/**
 * A new token for an enrolled gateway, shown once; the one it replaces keeps
 * working for the grace period picked here, long enough to put the new one on
 * the developer's machine.
 */
function RotateToken({
  ws,
  gateway,
  onRotated,
  onDone,
}: {
  ws: string;
  gateway: string;
  onRotated: () => void;
  onDone: () => void;
}) {
  const [grace, setGrace] = useState('3600');
  const [expiry, setExpiry] = useState('never');
  const rotate = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/v1/workspaces/{ws}/gateways/{id}/rotate', {
          params: { path: { ws, id: gateway } },
          body: {
            grace_seconds: Number(grace),
            ...(expiry === 'never' ? {} : { expires_in_seconds: Number(expiry) }),
          },
        }),
      ),
    onSuccess: onRotated,
  });
  if (rotate.data) {
    const until = rotate.data.previous_token_valid_until;
    const old =
      until && new Date(until).getTime() > Date.now()
        ? `The old token works until ${when(until)}: put this one in the gateway's configuration before then.`
        : 'The old token is refused from now on: the gateway needs this one to reach the control plane.';
    return (
      <ShownOnce what="token" value={rotate.data.token} note={old} onDone={onDone}>
        <Text size="sm">
          {rotate.data.token_expires_at
            ? `It stops working ${when(rotate.data.token_expires_at)}.`
            : 'It works until it is rotated or the gateway revoked.'}
        </Text>
      </ShownOnce>
    );
  }
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        rotate.mutate();
      }}
    >
      <Stack>
        <Alert color="blue">
          The gateway gets a new token, shown once. Every replica refuses the old one once the grace period ends.
        </Alert>
        <Select
          label="Old token keeps working for"
          data={GRACE}
          value={grace}
          allowDeselect={false}
          onChange={(v) => v && setGrace(v)}
          data-autofocus
        />
        <Select
          label="New token expires"
          data={EXPIRIES}
          value={expiry}
          allowDeselect={false}
          onChange={(v) => v && setExpiry(v)}
        />
        <Button type="submit" loading={rotate.isPending}>
          Rotate
        </Button>
      </Stack>
    </form>
  );
}

function EnrolmentCode({ ws, onDone }: { ws: string; onDone: () => void }) {
  const [lifetime, setLifetime] = useState('3600');
  const [groups, setGroups] = useState<string[]>([]);
  const [tokenExpiry, setTokenExpiry] = useState('never');
  const create = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/v1/workspaces/{ws}/enrollment-codes', {
          params: { path: { ws } },
          body: {
            expires_in_seconds: Number(lifetime),
            groups,
            ...(tokenExpiry === 'never' ? {} : { token_expires_in_seconds: Number(tokenExpiry) }),
          },
        }),
      ),
  });
  if (create.data) {
    const expiry = create.data.token_expires_in_seconds;
    const tokenNote =
      expiry === null
        ? ''
        : ` The gateway's token stops working ${EXPIRIES.find((e) => e.value === String(expiry))?.label ?? `${expiry} s`} after it enrols.`;
    return (
      <ShownOnce
        what="code"
        value={create.data.code}
        note={`It enrols one gateway, until ${when(create.data.expires_at)}.${tokenNote}`}
        onDone={onDone}
      >
        <Text size="sm">
          The gateway exchanges it with <Code>POST /v1/gateway/enroll</Code>{' '}
          <Code>{'{"enrollment_code": "…", "name": "…"}'}</Code> for its own token.
        </Text>
      </ShownOnce>
    );
  }
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        create.mutate();
      }}
    >
      <Stack>
        <Select
          label="Valid for"
          data={LIFETIMES}
          value={lifetime}
          allowDeselect={false}
          onChange={(v) => v && setLifetime(v)}
          data-autofocus
        />
        <TagsInput
          label="Rollout groups"
          description="The enrolled gateway joins these (a staged rollout picks its versions by group)"
          value={groups}
          onChange={setGroups}
        />
        <Select
          label="Gateway's token expires"
          description="Counted from enrolment; an admin can rotate it then"
          data={EXPIRIES}
          value={tokenExpiry}
          allowDeselect={false}
          onChange={(v) => v && setTokenExpiry(v)}
        />
        <Button type="submit" loading={create.isPending}>
          Make code
        </Button>
      </Stack>
    </form>
  );
}
