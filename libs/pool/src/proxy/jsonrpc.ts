/** A JSON-RPC error object as it travels; `data` passes through untouched. */
export interface RpcError {
  code: number;
  message: string;
  data?: unknown;
}

// Implementation-defined server errors (-32000..-32099), stable for clients to match on.
/** The instance or upstream session went away while the request was open. */
export const UPSTREAM_GONE = -32000;
/** The instance has AILERON_POOL_MAX_CONCURRENT_CALLS requests in flight. */
export const INSTANCE_BUSY = -32001;
/** The server could not be started or reached at all. */
export const UPSTREAM_UNAVAILABLE = -32002;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
