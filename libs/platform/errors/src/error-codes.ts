/**
 * Every code a problem document can carry, with its HTTP status, its title and
 * where docs/ explains it. A DomainError is made from a code in this table, so
 * an unregistered code does not compile; the OpenAPI description lists the
 * table; test/architecture/error-codes.test.ts checks that docs/errors.md
 * lists each code under the heading its anchor names. Codes, statuses and
 * titles are public (API.md): change none, add freely.
 */
export interface ErrorCodeEntry {
  status: number;
  title: string;
  /** `docs/<file>.md#<heading>`: where a person reads what the code means */
  docs: string;
}

const REQUESTS = 'docs/errors.md#requests';
const AUTHENTICATION = 'docs/errors.md#authentication';
const ACCESS = 'docs/errors.md#access';
const TENANCY = 'docs/errors.md#organisations-workspaces-and-people';
const CATALOG = 'docs/errors.md#catalog-and-gateways';
const POLICY = 'docs/errors.md#policy';
const VAULT_AND_AUDIT = 'docs/errors.md#vault-and-audit';
const APPROVALS = 'docs/errors.md#approvals';
const POOL = 'docs/errors.md#the-remote-mcp-pool';
const CONNECTIONS = 'docs/errors.md#upstream-connections';
const SESSIONS = 'docs/errors.md#agent-sessions';
const SANDBOXES = 'docs/errors.md#sandboxes';
const WEBHOOKS = 'docs/errors.md#webhooks';
const OPERATIONS = 'docs/errors.md#operations';

const UNAUTHENTICATED = { status: 401, title: 'Unauthenticated', docs: AUTHENTICATION } as const;
const FORBIDDEN = { status: 403, title: 'Forbidden', docs: ACCESS } as const;
const NOT_FOUND = { status: 404, title: 'Not found' } as const;
const CONFLICT = { status: 409, title: 'Conflict' } as const;
const POOL_UNAVAILABLE = 'The remote MCP server is not available';

export const ERROR_CODES = {
  // requests: shape, format, size, routing
  VALIDATION_FAILED: { status: 400, title: 'Request is not valid', docs: REQUESTS },
  MALFORMED_JSON: { status: 400, title: 'Bad request', docs: REQUESTS },
  MALFORMED_YAML: { status: 400, title: 'Malformed YAML', docs: REQUESTS },
  INVALID_CURSOR: { status: 400, title: 'Invalid cursor', docs: REQUESTS },
  BAD_REQUEST: { status: 400, title: 'Bad request', docs: REQUESTS },
  REQUEST_TARGET_INVALID: { status: 400, title: 'Bad Request', docs: REQUESTS },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported media type', docs: REQUESTS },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Payload too large', docs: REQUESTS },
  REQUEST_ABORTED: { status: 400, title: 'Bad request', docs: REQUESTS },
  ROUTE_NOT_FOUND: { status: 404, title: 'Not Found', docs: REQUESTS },
  METHOD_NOT_ALLOWED: { status: 405, title: 'Method Not Allowed', docs: REQUESTS },
  NOT_ACCEPTABLE: { status: 406, title: 'Not Acceptable', docs: REQUESTS },
  REQUEST_TIMEOUT: { status: 408, title: 'Request Timeout', docs: REQUESTS },
  TEXT_NOT_STORABLE: { status: 400, title: 'Text cannot be stored', docs: REQUESTS },
  NOT_FOUND: { ...NOT_FOUND, docs: REQUESTS },
  CONFLICT: { ...CONFLICT, docs: REQUESTS },
  REFERENCE_NOT_FOUND: { ...CONFLICT, docs: REQUESTS },
  ASSET_NOT_FOUND: { ...NOT_FOUND, docs: REQUESTS },
  RATE_LIMITED: { status: 429, title: 'Too many requests', docs: REQUESTS },

  // authentication
  UNAUTHENTICATED,
  TOKEN_INVALID: UNAUTHENTICATED,
  TOKEN_REVOKED: UNAUTHENTICATED,
  TOKEN_EXPIRED: UNAUTHENTICATED,
  GATEWAY_REVOKED: UNAUTHENTICATED,
  GATEWAY_TOKEN_ROTATED: UNAUTHENTICATED,
  SESSION_REQUIRED: UNAUTHENTICATED,
  SESSION_INVALID: UNAUTHENTICATED,
  SESSION_EXPIRED: UNAUTHENTICATED,
  IDP_JWKS_UNAVAILABLE: UNAUTHENTICATED,
  IDP_AUDIENCE_REQUIRED: UNAUTHENTICATED,
  SIGN_IN_CODE_REJECTED: UNAUTHENTICATED,
  SIGN_IN_NONCE_MISMATCH: UNAUTHENTICATED,
  SIGN_IN_ID_TOKEN_INVALID: UNAUTHENTICATED,
  SIGN_IN_NOT_CONFIGURED: { ...NOT_FOUND, docs: AUTHENTICATION },
  SIGN_IN_STATE_MISMATCH: { status: 400, title: 'Bad request', docs: AUTHENTICATION },
  SIGN_IN_EXPIRED: { status: 400, title: 'Bad request', docs: AUTHENTICATION },
  SIGN_IN_REFUSED: { ...FORBIDDEN, docs: AUTHENTICATION },
  SIGN_IN_LINK_INVALID: UNAUTHENTICATED,
  SIGN_IN_LINK_EXPIRED: UNAUTHENTICATED,
  SIGN_IN_LINKS_EMBEDDED_ONLY: { ...NOT_FOUND, docs: AUTHENTICATION },
  IDP_UNREACHABLE: { status: 502, title: 'Bad gateway', docs: AUTHENTICATION },
  IDP_URL_REFUSED: {
    status: 422,
    title: 'The control plane will not fetch from this identity provider URL',
    docs: AUTHENTICATION,
  },
  IDP_EMAIL_NOT_VERIFIED: { ...FORBIDDEN, docs: AUTHENTICATION },
  USER_DEACTIVATED: UNAUTHENTICATED,
  OAUTH_TOKEN_WRONG_RESOURCE: UNAUTHENTICATED,
  OAUTH_REGISTRATION_DISABLED: { ...FORBIDDEN, docs: AUTHENTICATION },
  OAUTH_CLIENT_NOT_FOUND: { ...NOT_FOUND, docs: AUTHENTICATION },

  // access: roles and who may call what
  FORBIDDEN,
  ROLE_ESCALATION: FORBIDDEN,
  PLATFORM_OPERATOR_REQUIRED: FORBIDDEN,
  GATEWAY_TOKEN_NOT_ALLOWED: FORBIDDEN,
  GATEWAY_TOKEN_REQUIRED: FORBIDDEN,
  CSRF_ORIGIN_MISMATCH: FORBIDDEN,
  CSRF_TOKEN_INVALID: FORBIDDEN,
  ORIGIN_NOT_ALLOWED: FORBIDDEN,
  TOKEN_NOT_FOUND: { ...NOT_FOUND, docs: ACCESS },

  // organisations, workspaces and people
  ALREADY_BOOTSTRAPPED: { ...CONFLICT, docs: TENANCY },
  ORGANIZATION_SLUG_TAKEN: { ...CONFLICT, docs: TENANCY },
  WORKSPACE_SLUG_TAKEN: { ...CONFLICT, docs: TENANCY },
  USER_EMAIL_TAKEN: { ...CONFLICT, docs: TENANCY },
  LAST_OWNER: { ...CONFLICT, docs: TENANCY },
  SELF_OFFBOARDING_FORBIDDEN: { ...FORBIDDEN, docs: TENANCY },
  ISSUER_TAKEN: { ...CONFLICT, docs: TENANCY },
  WORKSPACE_NOT_FOUND: { ...NOT_FOUND, docs: TENANCY },
  USER_NOT_FOUND: { ...NOT_FOUND, docs: TENANCY },
  MEMBER_NOT_FOUND: { ...NOT_FOUND, docs: TENANCY },
  IDENTITY_PROVIDER_NOT_FOUND: { ...NOT_FOUND, docs: TENANCY },

  // catalog and gateways
  CATALOG_SERVER_NOT_FOUND: { ...NOT_FOUND, docs: CATALOG },
  CATALOG_VERSION_NOT_FOUND: { ...NOT_FOUND, docs: CATALOG },
  CATALOG_VERSION_EXISTS: { ...CONFLICT, docs: CATALOG },
  WORKSPACE_SERVER_NOT_FOUND: { ...NOT_FOUND, docs: CATALOG },
  ROLLOUT_SAME_VERSION: { ...CONFLICT, docs: CATALOG },
  NO_ROLLOUT: { ...CONFLICT, docs: CATALOG },
  GATEWAY_NOT_FOUND: { ...NOT_FOUND, docs: CATALOG },
  ENROLLMENT_CODE_INVALID: { status: 401, title: 'Enrolment refused', docs: CATALOG },
  ENROLLMENT_CODE_USED: { status: 401, title: 'Enrolment refused', docs: CATALOG },
  ENROLLMENT_CODE_EXPIRED: { status: 401, title: 'Enrolment refused', docs: CATALOG },
  GATEWAY_ALREADY_REVOKED: { ...CONFLICT, docs: CATALOG },
  GATEWAY_SERVER_NOT_FOUND: { ...NOT_FOUND, docs: CATALOG },
  GATEWAY_SERVER_VERSION_MISMATCH: { ...CONFLICT, docs: CATALOG },
  GATEWAY_SERVER_NOT_LOCAL: { ...CONFLICT, docs: CATALOG },
  GATEWAY_SERVER_DISABLED: { ...FORBIDDEN, docs: CATALOG },

  // policy
  POLICY_INVALID: { status: 400, title: 'Policy document is not valid', docs: POLICY },
  POLICY_VERSION_NOT_FOUND: { ...NOT_FOUND, docs: POLICY },
  POLICY_WRITE_CONFLICT: { ...CONFLICT, docs: POLICY },
  REPLAY_WINDOW_TOO_LONG: { status: 400, title: 'Replay reaches too far back', docs: POLICY },

  // vault and audit
  SECRET_NOT_FOUND: { ...NOT_FOUND, docs: VAULT_AND_AUDIT },
  SECRET_WRITE_CONFLICT: { ...CONFLICT, docs: VAULT_AND_AUDIT },
  SECRET_UNAVAILABLE: { status: 422, title: 'Secret reference cannot be resolved', docs: VAULT_AND_AUDIT },
  SECRET_NOT_DELIVERABLE: { ...FORBIDDEN, docs: VAULT_AND_AUDIT },
  AUDIT_UNAVAILABLE: { status: 503, title: 'Audit log unavailable', docs: VAULT_AND_AUDIT },
  AUDIT_SINK_NOT_FOUND: { ...NOT_FOUND, docs: VAULT_AND_AUDIT },

  // approvals
  APPROVAL_NOT_FOUND: { ...NOT_FOUND, docs: APPROVALS },
  APPROVAL_NOT_REQUIRED: { ...CONFLICT, docs: APPROVALS },
  APPROVAL_NOT_USABLE: { ...CONFLICT, docs: APPROVALS },
  APPROVAL_ALREADY_DECIDED: { ...CONFLICT, docs: APPROVALS },
  APPROVAL_EXPIRED: { ...CONFLICT, docs: APPROVALS },
  ALREADY_VOTED: { ...CONFLICT, docs: APPROVALS },
  LINK_CHANNEL_MISSING: { ...CONFLICT, docs: APPROVALS },
  NOT_AN_APPROVER: { ...FORBIDDEN, docs: APPROVALS },
  SELF_APPROVAL_FORBIDDEN: { ...FORBIDDEN, docs: APPROVALS },
  LINK_INVALID: { ...FORBIDDEN, docs: APPROVALS },
  LINK_USED: { ...FORBIDDEN, docs: APPROVALS },
  LINK_EXPIRED: { ...FORBIDDEN, docs: APPROVALS },

  // the remote MCP pool
  MCP_SERVER_NOT_FOUND: { status: 404, title: POOL_UNAVAILABLE, docs: POOL },
  MCP_SERVER_NOT_REMOTE: { status: 404, title: POOL_UNAVAILABLE, docs: POOL },
  MCP_SERVER_DISABLED: { status: 503, title: POOL_UNAVAILABLE, docs: POOL },
  POOL_INSTANCE_LIMIT: { status: 429, title: POOL_UNAVAILABLE, docs: POOL },
  MCP_UPSTREAM_REFUSED: { status: 502, title: POOL_UNAVAILABLE, docs: POOL },
  MCP_INSTANCE_START_FAILED: { status: 502, title: POOL_UNAVAILABLE, docs: POOL },
  POOL_INSTANCE_NOT_FOUND: { ...NOT_FOUND, docs: POOL },
  MCP_SESSION_REQUIRED: { status: 400, title: 'No MCP session', docs: POOL },
  MCP_SESSION_NOT_FOUND: { ...NOT_FOUND, docs: POOL },
  MCP_REPLICA_UNREACHABLE: { status: 502, title: 'Bad gateway', docs: POOL },
  TOOL_CHANGE_NOT_FOUND: { ...NOT_FOUND, docs: POOL },

  // the pool's OAuth connections to upstream servers
  CONNECTION_NOT_FOUND: { ...NOT_FOUND, docs: CONNECTIONS },
  CONNECTION_NOT_OAUTH: { ...CONFLICT, docs: CONNECTIONS },
  UPSTREAM_OAUTH_REGISTRATION_UNAVAILABLE: { ...CONFLICT, docs: CONNECTIONS },
  UPSTREAM_OAUTH_UNAVAILABLE: { status: 502, title: 'The upstream’s authorization failed', docs: CONNECTIONS },

  // agent sessions and their caveat tokens
  CAPABILITY_REQUIRED: { ...FORBIDDEN, docs: SESSIONS },
  CAVEAT_UNKNOWN: { ...UNAUTHENTICATED, docs: SESSIONS },
  CAVEAT_MALFORMED: { ...UNAUTHENTICATED, docs: SESSIONS },
  SESSION_ENDED: { ...UNAUTHENTICATED, docs: SESSIONS },
  SESSION_CLOSED: { ...CONFLICT, docs: SESSIONS },
  SESSION_NOT_FOUND: { ...NOT_FOUND, docs: SESSIONS },
  MESSAGE_NOT_FOUND: { ...NOT_FOUND, docs: SESSIONS },
  SESSION_KEY_NOT_FOUND: { ...NOT_FOUND, docs: SESSIONS },

  // sandboxes
  SANDBOX_NOT_FOUND: { ...NOT_FOUND, docs: SANDBOXES },
  SANDBOX_EXISTS: { ...CONFLICT, docs: SANDBOXES },
  SANDBOX_LIMIT_REACHED: { ...CONFLICT, docs: SANDBOXES },
  SANDBOX_SOURCE_EXISTS: { ...CONFLICT, docs: SANDBOXES },
  SANDBOX_SOURCE_INVALID: { status: 422, title: 'Unprocessable source', docs: SANDBOXES },
  SANDBOX_SOURCE_TOO_LARGE: { status: 413, title: 'Payload too large', docs: SANDBOXES },
  SANDBOX_UNAVAILABLE: { status: 503, title: 'Sandbox unavailable', docs: SANDBOXES },
  SANDBOX_EGRESS_DISABLED: { ...FORBIDDEN, docs: SANDBOXES },
  SANDBOX_EGRESS_FORBIDDEN: { ...FORBIDDEN, docs: SANDBOXES },
  SNAPSHOT_NOT_FOUND: { ...NOT_FOUND, docs: SANDBOXES },
  SANDBOX_PATH_NOT_FOUND: { ...NOT_FOUND, docs: SANDBOXES },
  SHELL_RULES_INVALID: { status: 400, title: 'Shell rules are not valid', docs: SANDBOXES },

  // webhooks
  WEBHOOK_NOT_FOUND: { ...NOT_FOUND, docs: WEBHOOKS },
  WEBHOOK_NAME_TAKEN: { ...CONFLICT, docs: WEBHOOKS },

  // operations: the process and what it depends on
  NOT_READY: { status: 503, title: 'Not ready', docs: OPERATIONS },
  DATABASE_UNAVAILABLE: { status: 503, title: 'Database unavailable', docs: OPERATIONS },
  REDIS_UNAVAILABLE: { status: 503, title: 'Service unavailable', docs: OPERATIONS },
  CONSOLE_NOT_BUILT: { status: 503, title: 'Web console not built', docs: OPERATIONS },
  INTERNAL: { status: 500, title: 'Internal error', docs: OPERATIONS },
} as const satisfies Record<string, ErrorCodeEntry>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The codes answered with this status: NotFoundError takes only 404 codes, and so on. */
export type ErrorCodeWithStatus<S extends number> = {
  [C in ErrorCode]: (typeof ERROR_CODES)[C]['status'] extends S ? C : never;
}[ErrorCode];

export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_CODES, code);
}
