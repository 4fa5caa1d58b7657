import { Alert, Button, Center, Group, Loader, Stack, Text, Title, VisuallyHidden } from '@mantine/core';
import type { InfiniteData, UseInfiniteQueryResult } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { ApiProblem } from '../api/client';

export function PageTitle({ children, actions }: { children: ReactNode; actions?: ReactNode }) {
  return (
    <Group justify="space-between" mb="md">
      <Title order={1} size="h2">
        {children}
      </Title>
      {actions}
    </Group>
  );
}

export function Loading({ what }: { what: string }) {
  // the spinner is a span, which may not carry a label: the status says it in words
  return (
    <Center p="xl" role="status">
      <Loader size="sm" aria-hidden />
      <VisuallyHidden>Loading {what}</VisuallyHidden>
    </Center>
  );
}

/** A query that failed: the problem's code and detail, as the API said them. */
export function ErrorState({ error, retry }: { error: unknown; retry?: () => void }) {
  const problem = error instanceof ApiProblem ? error : null;
  return (
    <Alert color="red" title={problem ? problem.code : 'Something went wrong'} role="alert">
      <Stack gap="xs">
        <Text size="sm">{problem ? problem.message : String(error)}</Text>
        {retry && (
          <Button size="xs" variant="light" color="red" onClick={retry} w="fit-content">
            Try again
          </Button>
        )}
      </Stack>
    </Alert>
  );
}

export function EmptyState({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <Stack align="center" gap="xs" p="xl">
      <Text fw={600}>{title}</Text>
      {children && (
        <Text c="gray.7" size="sm" ta="center">
          {children}
        </Text>
      )}
    </Stack>
  );
}

/**
 * A list read page by page (usePagedList): loading, failed (with a retry),
 * empty, else its rows, and the next server-side page on request (lists answer
 * 50 items a page by default).
 */
export function PagedList({
  query,
  count,
  what,
  empty,
  children,
}: {
  query: UseInfiniteQueryResult<InfiniteData<unknown>>;
  /** the items read so far */
  count: number;
  /** what the list holds, for "Loading …" */
  what: string;
  empty: ReactNode;
  children: ReactNode;
}) {
  if (query.isPending) return <Loading what={what} />;
  if (query.error) return <ErrorState error={query.error} retry={() => void query.refetch()} />;
  if (count === 0) return empty;
  return (
    <>
      {children}
      {query.hasNextPage && (
        <Center mt="sm">
          <Button variant="default" loading={query.isFetchingNextPage} onClick={() => void query.fetchNextPage()}>
            Load more
          </Button>
        </Center>
      )}
    </>
  );
}

export function when(date: string | null | undefined): string {
  return date ? new Date(date).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }) : '—';
}
