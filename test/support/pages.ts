import type { TestControlPlane } from './control-plane';

/** Every item of a list, page after page, as a client must read the house's `{items, next_cursor}` (API.md). */
export async function everyItem<T>(cp: Pick<TestControlPlane, 'request'>, path: string): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | null = null;
  do {
    const query = `${path.includes('?') ? '&' : '?'}limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = await cp.request('GET', path + query);
    if (page.status !== 200) throw new Error(`GET ${path}: ${page.status} ${page.text}`);
    items.push(...(page.body.items as T[]));
    cursor = page.body.next_cursor as string | null;
  } while (cursor);
  return items;
}
