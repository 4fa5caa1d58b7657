import { JSONRPCRequestSchema, JSONRPCResultResponseSchema } from '@modelcontextprotocol/sdk/types.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isPlainRequest, isPlainResult } from './message-kind';

// messages near the checks' edges: every key the schemas know, a few they do not, ids of every JSON kind
const id = fc.oneof(
  fc.string({ maxLength: 4 }),
  fc.integer(),
  fc.double(),
  fc.constantFrom(2 ** 53, -(2 ** 53), null, true),
);
const json = fc.jsonValue({ maxDepth: 2 });
const meta = fc.oneof(
  json,
  fc.record({ progressToken: fc.oneof(fc.string(), fc.integer(), fc.double(), json) }, { requiredKeys: [] }),
  fc.constant({ 'io.modelcontextprotocol/related-task': { taskId: 't', extra: 1 } }),
);
const inner = fc.oneof(
  fc.dictionary(fc.constantFrom('name', 'arguments', 'content', 'isError', 'x'), json),
  fc.record({ _meta: meta, name: fc.string() }, { requiredKeys: ['_meta'] }),
  json,
  fc.constant(undefined),
);
const version = fc.constantFrom('2.0', '2.0', '1.0', 2);
const method = fc.oneof(fc.constantFrom('tools/call', 'ping'), json);
// mostly near a request or an answer, sometimes with what neither may have
const stray = fc.oneof(
  { weight: 7, arbitrary: fc.constant({}) },
  { weight: 3, arbitrary: fc.record({ result: inner, error: json, extra: json, method }, { requiredKeys: [] }) },
);
const message = fc
  .oneof(
    fc.tuple(fc.record({ jsonrpc: version, id, method, params: inner }, { requiredKeys: ['jsonrpc', 'id'] }), stray),
    fc.tuple(fc.record({ jsonrpc: version, id, result: inner }, { requiredKeys: ['jsonrpc'] }), stray),
  )
  .map(([base, more]) => ({ ...more, ...base }));

describe('the checks that stand in for the SDK schemas on the call path', () => {
  it('admit only what the schema admits, as the schema would give it back', () => {
    fc.assert(
      fc.property(message, (value) => {
        if (isPlainRequest(value)) expect(JSONRPCRequestSchema.parse(value)).toEqual(value);
        if (isPlainResult(value)) expect(JSONRPCResultResponseSchema.parse(value)).toEqual(value);
      }),
      { numRuns: 1000 },
    );
  });

  it('admit the plain tool call and its answer, and leave every other shape to the schema', () => {
    const call = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: { a: 1 } } };
    const answer = { jsonrpc: '2.0', id: 'a7', result: { content: [{ type: 'text', text: 'hi' }] } };
    expect(isPlainRequest(call)).toBe(true);
    expect(isPlainRequest({ jsonrpc: '2.0', id: 'x', method: 'ping' })).toBe(true);
    expect(isPlainResult(answer)).toBe(true);
    // each of these the schema judges: _meta (its inner objects strip keys), a float id, an extra key, a wrong version
    expect(isPlainRequest({ ...call, params: { ...call.params, _meta: { progressToken: 1 } } })).toBe(false);
    expect(isPlainRequest({ ...call, id: 1.5 })).toBe(false);
    expect(isPlainRequest({ ...call, extra: true })).toBe(false);
    expect(isPlainRequest({ ...call, jsonrpc: '1.0' })).toBe(false);
    expect(isPlainRequest({ ...call, params: [1] })).toBe(false);
    expect(isPlainResult({ ...answer, result: { _meta: {}, content: [] } })).toBe(false);
    expect(isPlainResult({ ...answer, error: { code: 1, message: 'no' } })).toBe(false);
    expect(isPlainResult({ ...answer, result: 'text' })).toBe(false);
  });
});
