import { Text } from '@mantine/core';
import { useParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { ConnectedClients as List } from '../app/connected-clients';
import { useMe } from '../app/session';
import { EmptyState, PageTitle } from '../app/ui';
import { isAdmin } from './roles';

/** The MCP clients people connected to the workspace with OAuth: owners, admins and auditors see them, owners and admins disconnect. */
export default function ConnectedClients() {
  const ws = useParams().ws!;
  const me = useMe();
  const role = me.data?.workspaces.find((w) => w.slug === ws)?.role ?? null;
  return (
    <>
      <PageTitle>Connected clients</PageTitle>
      <Text size="sm" c="dimmed" mb="md">
        MCP clients (Claude, Cursor, VS Code…) that a person allowed, with a browser sign-in, to use this
        workspace&apos;s MCP endpoint as them. A client&apos;s name is its own claim; its id is where it came from.
      </Text>
      <List
        queryKey={['oauth-clients', ws]}
        fetchPage={(cursor) =>
          unwrap(api.GET('/v1/workspaces/{ws}/oauth/clients', { params: { path: { ws }, query: { cursor } } }))
        }
        disconnect={(id) =>
          unwrap(api.DELETE('/v1/workspaces/{ws}/oauth/clients/{id}', { params: { path: { ws, id } } }))
        }
        whose="workspace"
        canDisconnect={isAdmin(role)}
        empty={
          <EmptyState title="No connected clients">
            A client connects when someone points it at this workspace&apos;s MCP endpoint and allows it.
          </EmptyState>
        }
      />
    </>
  );
}
