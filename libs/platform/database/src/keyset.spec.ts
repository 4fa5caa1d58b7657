import { describe, expect, it } from 'vitest';
import { keysetAfter, keysetOrder } from './keyset';

describe('keysetAfter', () => {
  it('is nothing on the first page', () => {
    expect(keysetAfter(['createdAt', 'id'], 'desc', undefined)).toEqual({});
  });

  it('compares the whole key as one tuple, so equal timestamps fall to the id', () => {
    const at = new Date('2026-01-01T00:00:00.000Z');
    expect(keysetAfter(['createdAt', 'id'], 'desc', [at, 'b'])).toEqual({
      OR: [{ createdAt: { lt: at } }, { createdAt: at, id: { lt: 'b' } }],
    });
    expect(keysetAfter(['path'], 'asc', ['a/b'])).toEqual({ path: { gt: 'a/b' } });
  });

  it('orders by the same fields', () => {
    expect(keysetOrder(['createdAt', 'id'], 'asc')).toEqual([{ createdAt: 'asc' }, { id: 'asc' }]);
  });
});
