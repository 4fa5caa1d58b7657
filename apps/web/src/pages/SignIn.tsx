import { Alert, Button, Card, Code, Container, Stack, Text, TextInput, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { useSearchParams } from 'react-router';
import { api, unwrap } from '../api/client';
import { consolePath, identityProviderSignIn, knownOrganizations, rememberWhereAfterSignIn } from '../app/session';

/** how often a sign-in page waiting for the one-time link opened in another tab looks whether it was */
const LINK_WAIT_MS = 2_000;

/** Sign-in: through the organisation's identity provider, or (embedded mode) the one-time link `npm start` printed. */
export default function SignIn() {
  const [params] = useSearchParams();
  const options = useQuery({
    queryKey: ['sign-in-options'],
    queryFn: () => unwrap(api.GET('/v1/auth/sign-in-options')),
  });
  const [organization, setOrganization] = useState(params.get('organization') ?? knownOrganizations()[0] ?? 'default');
  const returnTo = consolePath(params.get('return_to')) ?? '/overview';
  const linkSignIn = options.data?.sign_in_link === true;
  useEffect(() => {
    if (!linkSignIn) return;
    // the link is opened from the terminal, in another tab: that tab goes where this one was going, and
    // this one goes on by itself as soon as the browser is signed in
    rememberWhereAfterSignIn(returnTo);
    const timer = setInterval(() => {
      void fetch('/v1/auth/session', { credentials: 'same-origin' })
        .then((response) => response.ok && window.location.assign(returnTo))
        .catch(() => undefined);
    }, LINK_WAIT_MS);
    return () => clearInterval(timer);
  }, [linkSignIn, returnTo]);
  return (
    <Container size={460} py={80}>
      <Card withBorder padding="xl" component="main">
        <Stack>
          <Title order={1} size="h2">
            Sign in to Aileron
          </Title>
          {linkSignIn && (
            <Alert title="On this machine" color="blue">
              <Text size="sm">
                Open the one-time sign-in link that <Code>npm start</Code> printed in its terminal. A new one:{' '}
                <Code>POST /v1/auth/sign-in-links</Code> with the owner token.
              </Text>
            </Alert>
          )}
          <form
            onSubmit={(event) => {
              event.preventDefault();
              window.location.assign(identityProviderSignIn(organization.trim(), returnTo));
            }}
          >
            <Stack>
              <TextInput
                label="Organisation"
                description="Its identity provider signs you in"
                value={organization}
                onChange={(e) => setOrganization(e.currentTarget.value)}
                required
              />
              <Button type="submit">Continue with your identity provider</Button>
            </Stack>
          </form>
        </Stack>
      </Card>
    </Container>
  );
}
