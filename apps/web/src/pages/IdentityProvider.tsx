import {
  ActionIcon,
  Alert,
  Badge,
  Button,
  Card,
  Checkbox,
  Code,
  Group,
  Modal,
  PasswordInput,
  Select,
  SimpleGrid,
  Stack,
  TagsInput,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { notifications } from '@mantine/notifications';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { useSearchParams } from 'react-router';
import { api, ApiProblem, unwrap } from '../api/client';
import { NewerVersion, useDraft } from '../app/draft';
import { identityProviderSignIn, useSession } from '../app/session';
import { ErrorState, Loading, PageTitle } from '../app/ui';
import { isRole, type Role, roleOptions } from './roles';

type Settings = Awaited<ReturnType<typeof fetchSettings>>;

const fetchSettings = () => unwrap(api.GET('/v1/organization/identity-provider'));
const PAGE = '/organization/identity-provider';

/** What the form edits: the settings as the API shows them, and a secret typed now (never one read back). */
interface Form {
  issuer: string;
  jwksUrl: string;
  audience: string;
  allowAnyAudience: boolean;
  trustUnverifiedEmail: boolean;
  subjectClaim: string;
  emailClaim: string;
  nameClaim: string;
  roleClaim: string;
  groupsClaim: string;
  roleMapping: { value: string; role: Role }[];
  defaultRole: Role;
  clientId: string;
  clientSecret: string;
  scopes: string[];
}

const EMPTY: Form = {
  issuer: '',
  jwksUrl: '',
  audience: '',
  allowAnyAudience: false,
  trustUnverifiedEmail: false,
  subjectClaim: 'sub',
  emailClaim: 'email',
  nameClaim: 'name',
  roleClaim: '',
  groupsClaim: 'groups',
  roleMapping: [],
  defaultRole: 'member',
  clientId: '',
  clientSecret: '',
  scopes: [],
};

function formOf(s: Settings): Form {
  return {
    issuer: s.issuer,
    jwksUrl: s.jwks_url,
    audience: s.audience ?? '',
    allowAnyAudience: s.allow_any_audience,
    trustUnverifiedEmail: s.trust_unverified_email,
    subjectClaim: s.claims.subject,
    emailClaim: s.claims.email,
    nameClaim: s.claims.name,
    roleClaim: s.claims.role ?? '',
    groupsClaim: s.claims.groups,
    roleMapping: Object.entries(s.role_mapping).map(([value, role]) => ({ value, role })),
    defaultRole: s.default_role,
    clientId: s.client_id ?? '',
    // write-only: the API says whether one is stored, never what it is
    clientSecret: '',
    scopes: s.scopes,
  };
}

/**
 * The organisation's identity provider (OIDC): read, edit, and test by
 * signing in through it. Over `GET`/`PUT /v1/organization/identity-provider`;
 * the client secret is write-only, so the form never holds a stored one.
 */
export default function IdentityProvider() {
  const settings = useQuery({
    queryKey: ['identity-provider'],
    // an admin coming back to the tab sees what is stored now (the form keeps their unsaved edits: useDraft)
    refetchOnWindowFocus: 'always',
    queryFn: async () => {
      try {
        return await fetchSettings();
      } catch (error) {
        // none set yet: the form starts empty
        if (error instanceof ApiProblem && error.code === 'IDENTITY_PROVIDER_NOT_FOUND') return null;
        throw error;
      }
    },
  });
  if (settings.isPending) return <Loading what="the identity provider" />;
  if (settings.error) return <ErrorState error={settings.error} retry={() => void settings.refetch()} />;
  return (
    <>
      <PageTitle
        actions={
          settings.data ? (
            <Badge variant="light">{settings.data.client_id ? 'browser sign-in on' : 'tokens only'}</Badge>
          ) : (
            <Badge color="gray">not set</Badge>
          )
        }
      >
        Identity provider
      </PageTitle>
      <Tested />
      <SettingsForm current={settings.data} />
    </>
  );
}

/** Back from a test sign-in: who the identity provider signed in. */
function Tested() {
  const [params, setParams] = useSearchParams();
  const session = useSession();
  if (params.get('tested') !== '1' || !session.data) return null;
  return (
    <Alert
      color="green"
      title="The test sign-in worked"
      mb="md"
      withCloseButton
      closeButtonLabel="Dismiss"
      onClose={() => setParams({}, { replace: true })}
    >
      The identity provider signed you in as <b>{session.data.principal.name}</b>.
    </Alert>
  );
}

function SettingsForm({ current }: { current: Settings | null }) {
  // another admin's save, seen on a refetch, never takes what this one is typing
  const editing = useDraft(current ? formOf(current) : EMPTY, JSON.stringify(current));
  const { value: form, set: setForm } = editing;
  const [problems, setProblems] = useState<Record<string, string>>({});
  const [testing, { open: openTest, close: closeTest }] = useDisclosure();
  const session = useSession();
  const queryClient = useQueryClient();
  const set = <K extends keyof Form>(key: K, value: Form[K]) => setForm((f) => ({ ...f, [key]: value }));

  const save = useMutation({
    mutationFn: (sent: Form) =>
      unwrap(
        api.PUT('/v1/organization/identity-provider', {
          body: {
            issuer: sent.issuer.trim(),
            jwks_url: sent.jwksUrl.trim(),
            ...(sent.allowAnyAudience ? { allow_any_audience: true } : { audience: sent.audience.trim() }),
            trust_unverified_email: sent.trustUnverifiedEmail,
            claims: {
              subject: sent.subjectClaim,
              email: sent.emailClaim,
              name: sent.nameClaim,
              role: sent.roleClaim.trim() || null,
              groups: sent.groupsClaim,
            },
            role_mapping: Object.fromEntries(
              sent.roleMapping.filter((m) => m.value.trim()).map((m) => [m.value.trim(), m.role]),
            ),
            default_role: sent.defaultRole,
            ...(sent.clientId.trim() ? { client_id: sent.clientId.trim(), scopes: sent.scopes } : {}),
            ...(sent.clientId.trim() && sent.clientSecret ? { client_secret: sent.clientSecret } : {}),
          },
        }),
      ),
    onSuccess: (saved, sent) => {
      setProblems({});
      editing.saved(sent, JSON.stringify(saved));
      queryClient.setQueryData(['identity-provider'], saved);
      notifications.show({ color: 'green', message: 'Identity provider saved' });
    },
    onError: (error) => setProblems(fieldProblems(error)),
    meta: { shownInPage: (error) => Object.keys(fieldProblems(error)).length > 0 },
  });
  const problem = (field: string) => problems[`body.${field}`];
  const submit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate(form);
  };
  const secretSet = current?.client_secret_set ?? false;

  return (
    <form onSubmit={submit} aria-label="Identity provider settings">
      <Stack>
        <NewerVersion
          draft={editing}
          title="Someone saved other identity provider settings meanwhile"
          load="Load the saved settings instead"
        />
        {Object.keys(problems).length > 0 && (
          <Alert color="red" title="Not saved" role="alert">
            {Object.entries(problems).map(([path, message]) => (
              <Text size="sm" key={path}>
                <Code>{path}</Code> {message}
              </Text>
            ))}
          </Alert>
        )}
        <Card withBorder component="section" aria-labelledby="tokens-title">
          <Title order={2} size="h4" id="tokens-title" mb="xs">
            Tokens
          </Title>
          <Text size="sm" c="dimmed" mb="sm">
            JWTs whose issuer is this one are checked against its key set and audience.
          </Text>
          <Stack gap="sm">
            <TextInput
              label="Issuer"
              required
              placeholder="https://login.example.com/"
              value={form.issuer}
              onChange={(e) => set('issuer', e.currentTarget.value)}
              error={problem('issuer')}
            />
            <TextInput
              label="JWKS URL"
              required
              placeholder="https://login.example.com/.well-known/jwks.json"
              value={form.jwksUrl}
              onChange={(e) => set('jwksUrl', e.currentTarget.value)}
              error={problem('jwks_url')}
            />
            <TextInput
              label="Audience"
              description="The aud its tokens for Aileron carry"
              value={form.audience}
              disabled={form.allowAnyAudience}
              required={!form.allowAnyAudience}
              onChange={(e) => set('audience', e.currentTarget.value)}
              error={problem('audience')}
            />
            <Checkbox
              label="Accept tokens whatever their audience (only if the provider has none for Aileron)"
              checked={form.allowAnyAudience}
              onChange={(e) => set('allowAnyAudience', e.currentTarget.checked)}
            />
            <Checkbox
              label="Link first sign-ins by an e-mail the provider did not mark verified"
              checked={form.trustUnverifiedEmail}
              onChange={(e) => set('trustUnverifiedEmail', e.currentTarget.checked)}
            />
          </Stack>
        </Card>

        <Card withBorder component="section" aria-labelledby="claims-title">
          <Title order={2} size="h4" id="claims-title" mb="xs">
            Claims and roles
          </Title>
          <SimpleGrid cols={{ base: 1, sm: 3 }}>
            <TextInput
              label="Subject claim"
              value={form.subjectClaim}
              onChange={(e) => set('subjectClaim', e.currentTarget.value)}
            />
            <TextInput
              label="E-mail claim"
              value={form.emailClaim}
              onChange={(e) => set('emailClaim', e.currentTarget.value)}
            />
            <TextInput
              label="Name claim"
              value={form.nameClaim}
              onChange={(e) => set('nameClaim', e.currentTarget.value)}
            />
            <TextInput
              label="Groups claim"
              value={form.groupsClaim}
              onChange={(e) => set('groupsClaim', e.currentTarget.value)}
            />
            <TextInput
              label="Role claim"
              description="Empty: roles come from the default"
              value={form.roleClaim}
              onChange={(e) => set('roleClaim', e.currentTarget.value)}
            />
            <Select
              label="Default role"
              data={roleOptions}
              value={form.defaultRole}
              allowDeselect={false}
              onChange={(role) => isRole(role) && set('defaultRole', role)}
            />
          </SimpleGrid>
          <Text size="sm" fw={500} mt="md" mb={4}>
            Role mapping
          </Text>
          <Stack gap="xs">
            {form.roleMapping.map((m, i) => (
              <Group key={i} gap="xs" wrap="nowrap">
                <TextInput
                  aria-label={`Claim value ${i + 1}`}
                  placeholder="sec-team"
                  value={m.value}
                  onChange={(e) => {
                    const value = e.currentTarget.value;
                    set(
                      'roleMapping',
                      form.roleMapping.map((x, j) => (j === i ? { ...x, value } : x)),
                    );
                  }}
                />
                <Select
                  aria-label={`Role for claim value ${i + 1}`}
                  data={roleOptions}
                  value={m.role}
                  allowDeselect={false}
                  w={140}
                  onChange={(role) =>
                    isRole(role) &&
                    set(
                      'roleMapping',
                      form.roleMapping.map((x, j) => (j === i ? { ...x, role } : x)),
                    )
                  }
                />
                <ActionIcon
                  variant="subtle"
                  color="red"
                  aria-label={`Remove claim value ${i + 1}`}
                  onClick={() =>
                    set(
                      'roleMapping',
                      form.roleMapping.filter((_, j) => j !== i),
                    )
                  }
                >
                  ×
                </ActionIcon>
              </Group>
            ))}
            <Button
              variant="default"
              size="xs"
              w="fit-content"
              onClick={() => set('roleMapping', [...form.roleMapping, { value: '', role: 'member' }])}
            >
              Add a claim value
            </Button>
          </Stack>
        </Card>

        <Card withBorder component="section" aria-labelledby="browser-title">
          <Title order={2} size="h4" id="browser-title" mb="xs">
            Browser sign-in
          </Title>
          <Text size="sm" c="dimmed" mb="sm">
            OpenID Connect with PKCE, for the console and the review page. Register{' '}
            <Code>{`${window.location.origin}/v1/auth/oidc/callback`}</Code> as the client's redirect URI.
          </Text>
          <Stack gap="sm">
            <TextInput
              label="Client ID"
              description="Empty: no browser sign-in, tokens only"
              value={form.clientId}
              onChange={(e) => set('clientId', e.currentTarget.value)}
              error={problem('client_id')}
            />
            <PasswordInput
              label="Client secret"
              description={
                secretSet
                  ? 'A secret is stored and is never shown. Leave this empty to keep it (while the client ID and issuer stay the same), or type a new one.'
                  : 'Write-only: once saved it is never shown again. Empty: a public client (PKCE only).'
              }
              autoComplete="new-password"
              value={form.clientSecret}
              disabled={!form.clientId.trim()}
              onChange={(e) => set('clientSecret', e.currentTarget.value)}
              error={problem('client_secret')}
            />
            <TagsInput
              label="Scopes"
              description="Asked for besides openid; none: email profile"
              value={form.scopes}
              disabled={!form.clientId.trim()}
              onChange={(scopes) => set('scopes', scopes)}
              error={problem('scopes')}
            />
            {secretSet && (
              <Badge variant="light" w="fit-content">
                client secret stored
              </Badge>
            )}
          </Stack>
        </Card>

        <Group>
          <Button type="submit" loading={save.isPending}>
            Save
          </Button>
          <Button variant="default" onClick={openTest} disabled={!current?.client_id}>
            Test sign-in
          </Button>
        </Group>
      </Stack>
      <Modal opened={testing} onClose={closeTest} title="Test the sign-in">
        <Stack>
          <Text size="sm">
            This browser signs in through the identity provider as the saved settings say, and comes back here. Your
            current session is replaced by that sign-in.
          </Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={closeTest}>
              Cancel
            </Button>
            <Button
              component="a"
              href={session.data ? identityProviderSignIn(session.data.organization.slug, `${PAGE}?tested=1`) : '#'}
            >
              Sign in through the provider
            </Button>
          </Group>
        </Stack>
      </Modal>
    </form>
  );
}

/** The fields a refusal names (`body.issuer`, …), each with its message. */
function fieldProblems(error: unknown): Record<string, string> {
  if (!(error instanceof ApiProblem)) return {};
  const errors = (error.problem as { errors?: { path?: string; message?: string }[] }).errors ?? [];
  return Object.fromEntries(errors.filter((e) => e.path).map((e) => [e.path!, e.message ?? '']));
}
