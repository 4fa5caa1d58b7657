import { Text } from '@mantine/core';
import { api, unwrap } from '../api/client';
import { ConnectedClients } from '../app/connected-clients';
import { EmptyState, PageTitle } from '../app/ui';

/** The MCP clients the signed-in person allowed to act as them, in every workspace; each can be disconnected. */
export default function OwnClients() {
  return (
    <>
      <PageTitle>Your connected clients</PageTitle>
      <Text size="sm" c="dimmed" mb="md">
        MCP clients you allowed, with a browser sign-in, to use a workspace&apos;s MCP endpoint as you. Disconnect one
        you no longer use, or do not recognise.
      </Text>
      <ConnectedClients
        queryKey={['own-oauth-clients']}
        fetchPage={(cursor) => unwrap(api.GET('/v1/me/oauth/clients', { params: { query: { cursor } } }))}
        disconnect={(id) => unwrap(api.DELETE('/v1/me/oauth/clients/{id}', { params: { path: { id } } }))}
        whose="person"
        canDisconnect
        empty={
          <EmptyState title="No connected clients">
            When you allow an MCP client to use a workspace&apos;s MCP endpoint, it shows here.
          </EmptyState>
        }
      />
    </>
  );
}
