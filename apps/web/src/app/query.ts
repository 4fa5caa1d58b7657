import { notifications } from '@mantine/notifications';
import { MutationCache, QueryCache, QueryClient } from '@tanstack/react-query';
import { ApiProblem } from '../api/client';

declare module '@tanstack/react-query' {
  interface Register {
    mutationMeta: {
      /** the page shows these refusals itself, next to what caused them: no toast for them */
      shownInPage?: (error: unknown) => boolean;
    };
  }
}

/** Every refused request shows its problem: the stable code and the API's own detail. */
export function showProblem(error: unknown): void {
  const problem = error instanceof ApiProblem ? error : null;
  notifications.show({
    color: 'red',
    title: problem ? problem.code : 'Request failed',
    message: problem ? problem.message : error instanceof Error ? error.message : String(error),
    autoClose: 8000,
  });
}

export const queryClient = new QueryClient({
  queryCache: new QueryCache({
    // a page shows its own error state; a background refresh that fails says so once
    onError: (error, query) => {
      if (query.state.data !== undefined) showProblem(error);
    },
  }),
  mutationCache: new MutationCache({
    onError: (error, _variables, _context, mutation) => {
      if (!mutation.meta?.shownInPage?.(error)) showProblem(error);
    },
  }),
  defaultOptions: {
    queries: {
      // a session that ended is not retried into a loop of 401s
      retry: (count, error) => !(error instanceof ApiProblem && error.status < 500) && count < 2,
      staleTime: 10_000,
    },
  },
});
