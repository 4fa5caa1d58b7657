import { Button, Card, Checkbox, Code, Stack, Text, Title } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, unwrap } from '../api/client';
import { NewerVersion, useDraft } from '../app/draft';
import { ErrorState, Loading, PageTitle, when } from '../app/ui';

/**
 * Which MCP clients people of the organisation may allow to sign in to its
 * MCP endpoints (`GET`/`PUT /v1/organization/oauth-settings`): always those
 * identified by a Client ID Metadata Document; self-registered ones only
 * when an owner or admin says so here.
 */
export default function OauthSettings() {
  const settings = useQuery({
    queryKey: ['oauth-settings'],
    // an owner coming back to the tab sees what is stored now (an unsaved choice stays: useDraft)
    refetchOnWindowFocus: 'always',
    queryFn: () => unwrap(api.GET('/v1/organization/oauth-settings')),
  });
  // another owner's change, seen on a refetch, never flips what this one has set and not saved
  const editing = useDraft(
    settings.data?.allow_dynamic_registration ?? false,
    settings.data ? (settings.data.updated_at ?? 'never') : 'loading',
  );
  const { value: allow, set: setAllow } = editing;
  const queryClient = useQueryClient();
  const save = useMutation({
    mutationFn: (sent: boolean) =>
      unwrap(api.PUT('/v1/organization/oauth-settings', { body: { allow_dynamic_registration: sent } })),
    onSuccess: (saved, sent) => {
      editing.saved(sent, saved.updated_at ?? 'never');
      queryClient.setQueryData(['oauth-settings'], saved);
      notifications.show({ color: 'green', message: 'MCP client sign-in saved' });
    },
  });
  if (settings.isPending) return <Loading what="the MCP client sign-in settings" />;
  if (settings.error) return <ErrorState error={settings.error} retry={() => void settings.refetch()} />;
  return (
    <>
      <PageTitle>MCP client sign-in</PageTitle>
      <Text size="sm" c="dimmed" mb="md">
        MCP clients connect to <Code>/mcp/&lt;workspace&gt;</Code> with a browser sign-in through the identity provider;
        the person then allows the client. Each workspace lists its connected clients.
      </Text>
      <form
        aria-label="MCP client sign-in settings"
        onSubmit={(event) => {
          event.preventDefault();
          save.mutate(allow);
        }}
      >
        <Card withBorder component="section" aria-labelledby="registration-title">
          <Title order={2} size="h4" id="registration-title" mb="xs">
            Clients
          </Title>
          <Stack gap="sm">
            <NewerVersion
              draft={editing}
              title="Someone changed this setting meanwhile"
              load="Load the saved setting instead"
            />
            <Text size="sm">
              A client identified by a Client ID Metadata Document (an https address whose document the control plane
              fetches) can always be allowed.
            </Text>
            <Checkbox
              label="Also allow clients that registered themselves (dynamic client registration)"
              description="Anyone can register such a client under any name: only its own claim says what it is. Off, people of this organisation cannot allow one."
              checked={allow}
              onChange={(e) => setAllow(e.currentTarget.checked)}
            />
            <Text size="xs" c="dimmed">
              {settings.data.updated_at ? `Last changed ${when(settings.data.updated_at)}` : 'Never changed: off'}
            </Text>
            <Button type="submit" w="fit-content" loading={save.isPending}>
              Save
            </Button>
          </Stack>
        </Card>
      </form>
    </>
  );
}
