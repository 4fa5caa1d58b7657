import { Anchor, Container, Stack, Text, Title } from '@mantine/core';
import { isRouteErrorResponse, Link, useRouteError } from 'react-router';
import { ErrorState } from './ui';

export function NotFound() {
  return (
    <Stack>
      <Title order={1} size="h2">
        Nothing here
      </Title>
      <Text>
        This page does not exist, or is not yours to see.{' '}
        <Anchor component={Link} to="/workspaces">
          Back to workspaces
        </Anchor>
      </Text>
    </Stack>
  );
}

/** A page that failed to load or threw while rendering. */
export function RouteError() {
  const error = useRouteError();
  return (
    <Container size="sm" py="xl">
      <Title order={1} size="h2" mb="md">
        This page failed
      </Title>
      <ErrorState
        error={isRouteErrorResponse(error) ? `${error.status} ${error.statusText}` : error}
        retry={() => window.location.reload()}
      />
    </Container>
  );
}
