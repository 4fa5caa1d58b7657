import { useInfiniteQuery } from '@tanstack/react-query';

/** One page of a house list: `{items, next_cursor}` (docs/rules/pagination.md). */
export interface ListPage<T> {
  items: T[];
  next_cursor: string | null;
}

/**
 * A list read page by page from the server: `fetchPage(cursor)` asks for one
 * page (`?cursor=`), the next is fetched when the person asks for more.
 */
export function usePagedList<T>(
  key: readonly unknown[],
  fetchPage: (cursor: string | undefined) => Promise<ListPage<T>>,
) {
  const query = useInfiniteQuery({
    queryKey: key,
    queryFn: ({ pageParam }) => fetchPage(pageParam),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (last) => last.next_cursor ?? undefined,
  });
  const items = query.data?.pages.flatMap((page) => page.items) ?? [];
  return { query, items };
}
