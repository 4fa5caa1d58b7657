import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ValidationError } from './domain-error';
import { describeIssues, fieldIssues, fieldPath, formatPath } from './field-issues';

describe('field issues', () => {
  it('names a field by where it was, keys after dots and indexes in brackets', () => {
    expect(fieldPath('body', ['rules', 2, 'arguments', 0, 'regex'])).toBe('body.rules[2].arguments[0].regex');
    expect(fieldPath('query', ['cursor'])).toBe('query.cursor');
    expect(fieldPath('body')).toBe('body');
    expect(fieldPath('body', [0, 'name'])).toBe('body[0].name');
    expect(fieldPath('headers', ['content-type'])).toBe('headers.content-type');
    expect(formatPath(['env', 'a.b', 'x y'])).toBe('env["a.b"]["x y"]');
    expect(fieldPath('body', 'rules[3].effect')).toBe('body.rules[3].effect');
  });

  it("renders zod's issues under their source, and the detail lists them", () => {
    const parsed = z.object({ url: z.url(), tags: z.array(z.string()) }).safeParse({ url: 'nope', tags: ['a', 1] });
    const issues = fieldIssues('body', parsed.error!.issues);
    expect(issues.map((i) => i.path)).toEqual(['body.url', 'body.tags[1]']);
    expect(describeIssues(issues)).toMatch(/^body\.url: .+; body\.tags\[1\]: .+$/);
    expect(new ValidationError(issues).detail).toBe(describeIssues(issues));
  });
});
