import { AppShell, Burger, Button, Group, Menu, NavLink, Select, Text, UnstyledButton } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { Suspense, useEffect } from 'react';
import { Link, Navigate, Outlet, useLocation, useMatch, useNavigate, useParams } from 'react-router';
import { api, ApiProblem, onSignedOut, setCsrfToken, unwrap } from '../api/client';
import { canOversee, isAdmin } from '../pages/roles';
import { identityProviderSignIn, knownOrganizations, useMe, useSession } from './session';
import { ErrorState, Loading } from './ui';

const LAST_WORKSPACE = 'aileron.workspace';

/** The frame of every signed-in page: navigation, organisation and workspace, the person's menu. */
export function Shell() {
  const session = useSession();
  const location = useLocation();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [opened, { toggle }] = useDisclosure();

  // a session that ends while the page is open (expired, signed out elsewhere) sends the person to sign in
  useEffect(
    () =>
      onSignedOut(() => {
        setCsrfToken(null);
        queryClient.clear();
        void navigate(`/sign-in?${new URLSearchParams({ return_to: location.pathname })}`);
      }),
    [navigate, queryClient, location.pathname],
  );

  if (session.isPending) return <Loading what="your session" />;
  if (session.error) {
    if (session.error instanceof ApiProblem && session.error.status === 401) {
      return (
        <Navigate to={`/sign-in?${new URLSearchParams({ return_to: location.pathname + location.search })}`} replace />
      );
    }
    return <ErrorState error={session.error} retry={() => void session.refetch()} />;
  }

  return (
    <AppShell
      header={{ height: 56 }}
      navbar={{ width: 240, breakpoint: 'sm', collapsed: { mobile: !opened } }}
      padding="md"
    >
      <AppShell.Header>
        {/* past the header and the navigation to the page itself, without a mouse */}
        <a
          href="#main"
          className="console-skip-link"
          onClick={(event) => {
            event.preventDefault();
            document.getElementById('main')?.focus();
          }}
        >
          Skip to the page
        </a>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group gap="sm" wrap="nowrap">
            <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Navigation" />
            <Text fw={700} component={Link} to="/overview">
              Aileron
            </Text>
            <OrganizationSwitcher current={session.data.organization.slug} />
          </Group>
          <Group gap="sm" wrap="nowrap">
            <WorkspacePicker />
            <PersonMenu name={session.data.principal.name} />
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" component="nav" aria-label="Console">
        <Navigation />
      </AppShell.Navbar>
      <AppShell.Main id="main" tabIndex={-1}>
        <Suspense fallback={<Loading what="the page" />}>
          <Outlet />
        </Suspense>
      </AppShell.Main>
    </AppShell>
  );
}

/** The workspace the pages act in: the one in the URL, else the last one picked, else the first. */
export function useCurrentWorkspace(): string | null {
  const params = useParams();
  const me = useMe();
  const slugs = me.data?.workspaces.map((w) => w.slug) ?? [];
  // a typed URL naming a workspace out of reach does not become the one the navigation offers
  if (params.ws && (me.data === undefined || slugs.includes(params.ws))) return params.ws;
  const last = localStorage.getItem(LAST_WORKSPACE);
  return last && slugs.includes(last) ? last : (slugs[0] ?? null);
}

function Navigation() {
  const ws = useCurrentWorkspace();
  const me = useMe();
  const workspace = me.data?.workspaces.find((w) => w.slug === ws);
  const name = workspace?.name ?? ws;
  const location = useLocation();
  const item = (to: string, label: string, exact = false) => (
    <NavLink
      key={to}
      component={Link}
      to={to}
      label={label}
      active={exact ? location.pathname === to : location.pathname.startsWith(to)}
    />
  );
  return (
    <>
      {item('/overview', 'Overview')}
      {item('/workspaces', 'Workspaces', true)}
      {ws && (
        <NavLink label={name} defaultOpened childrenOffset={12} component="div" aria-label={`Workspace ${name}`}>
          {item(`/workspaces/${ws}`, 'Members', true)}
          {item(`/workspaces/${ws}/policy`, 'Policy')}
          {item(`/workspaces/${ws}/approvals`, 'Approvals')}
          {item(`/workspaces/${ws}/audit`, 'Audit')}
          {item(`/workspaces/${ws}/vault`, 'Vault')}
          {item(`/workspaces/${ws}/sandboxes`, 'Sandboxes')}
          {item(`/workspaces/${ws}/sessions`, 'Agent sessions')}
          {item(`/workspaces/${ws}/gateways`, 'Gateways')}
          {item(`/workspaces/${ws}/pool`, 'Pool')}
          {item(`/workspaces/${ws}/connections`, 'Connections')}
          {canOversee(workspace?.role) && item(`/workspaces/${ws}/connected-clients`, 'Connected clients')}
        </NavLink>
      )}
      {item('/catalog', 'Catalog')}
      {item('/people', 'People')}
      {item('/tokens', 'API tokens')}
      {me.data?.role === 'owner' && item('/organization/identity-provider', 'Identity provider')}
      {isAdmin(me.data?.role) && item('/organization/oauth', 'MCP client sign-in')}
      {item('/audit', 'Organisation audit')}
      {item('/webhooks', 'Webhooks and sinks')}
    </>
  );
}

function WorkspacePicker() {
  const me = useMe();
  const current = useCurrentWorkspace();
  const navigate = useNavigate();
  const inWorkspace = useMatch('/workspaces/:ws/*');
  const onOverview = useMatch('/overview/*');
  const options = me.data?.workspaces.map((w) => ({ value: w.slug, label: w.name })) ?? [];
  if (options.length === 0) return null;
  return (
    <Select
      aria-label="Current workspace"
      data={options}
      value={current}
      allowDeselect={false}
      searchable
      w={200}
      onChange={(slug) => {
        if (!slug) return;
        localStorage.setItem(LAST_WORKSPACE, slug);
        if (onOverview) return void navigate(`/overview/${slug}`);
        // the same page of the other workspace
        const rest = inWorkspace?.params['*'];
        void navigate(`/workspaces/${slug}${rest ? `/${rest}` : ''}`);
      }}
    />
  );
}

/** For a person in several organisations: each is its own sign-in, at its own identity provider. */
function OrganizationSwitcher({ current }: { current: string }) {
  const others = knownOrganizations().filter((slug) => slug !== current);
  if (others.length === 0) {
    return (
      <Text size="sm" c="gray.7">
        {current}
      </Text>
    );
  }
  return (
    <Menu>
      <Menu.Target>
        <UnstyledButton aria-label={`Organisation ${current}: switch`}>
          <Text size="sm">{current} ▾</Text>
        </UnstyledButton>
      </Menu.Target>
      <Menu.Dropdown>
        <Menu.Label>Switch organisation</Menu.Label>
        {others.map((slug) => (
          <Menu.Item key={slug} component="a" href={identityProviderSignIn(slug, '/overview')}>
            {slug}
          </Menu.Item>
        ))}
      </Menu.Dropdown>
    </Menu>
  );
}

function PersonMenu({ name }: { name: string }) {
  const queryClient = useQueryClient();
  const signOut = useMutation({
    mutationFn: (everywhere: boolean) =>
      unwrap(everywhere ? api.POST('/v1/auth/sign-out-everywhere') : api.POST('/v1/auth/sign-out')),
    onSuccess: () => {
      setCsrfToken(null);
      queryClient.clear();
      window.location.assign('/sign-in');
    },
  });
  return (
    <Menu position="bottom-end">
      <Menu.Target>
        <Button variant="default" size="sm" aria-label={`Signed in as ${name}: menu`}>
          {name}
        </Button>
      </Menu.Target>
      <Menu.Dropdown>
        <Menu.Item component={Link} to="/account/connected-clients">
          Your connected clients
        </Menu.Item>
        <Menu.Divider />
        <Menu.Item onClick={() => signOut.mutate(false)}>Sign out</Menu.Item>
        <Menu.Item onClick={() => signOut.mutate(true)}>Sign out everywhere</Menu.Item>
      </Menu.Dropdown>
    </Menu>
  );
}
