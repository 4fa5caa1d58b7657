import { newKey, open, seal } from '@aileron/crypto';

/** Where a secret version lives; every ciphertext is bound to all of it. */
export interface SecretContext {
  organizationId: string;
  workspaceId: string;
  path: string;
  version: number;
}

export interface SealedSecret {
  /** the value, sealed by its data key */
  ciphertext: string;
  /** the data key, sealed by the workspace key */
  wrappedDataKey: string;
}

const PATH = /^[A-Za-z0-9][A-Za-z0-9_.-]*(\/[A-Za-z0-9_.-]+)*$/;
export const MAX_PATH_LENGTH = 256;
export const MAX_VALUE_BYTES = 64 * 1024;

/** `github/token`: segments of letters, digits, `_ . -`; no empty, `.` or `..` segments. */
export function pathProblem(path: string): string | null {
  if (path.length === 0 || path.length > MAX_PATH_LENGTH) return `must be 1-${MAX_PATH_LENGTH} characters`;
  if (!PATH.test(path))
    return 'must be segments of letters, digits, `_`, `.` or `-` separated by `/`, like `github/token`';
  if (path.split('/').some((s) => s === '.' || s === '..')) return 'may not contain `.` or `..` segments';
  return null;
}

/** `vault://github/token` → `github/token`; `vault://github/token#3` pins version 3. */
export function parseVaultRef(ref: string): { path: string; version: number | null } | null {
  const match = /^vault:\/\/([^#]+)(?:#(\d{1,9}))?$/.exec(ref);
  if (!match || pathProblem(match[1]!)) return null;
  return { path: match[1]!, version: match[2] ? Number(match[2]) : null };
}

export function isVaultRef(value: string): boolean {
  return value.startsWith('vault://');
}

/** AAD for a value and its data key: the ciphertext opens only at its own tenant, path and version. */
function secretAad(ctx: SecretContext, part: 'value' | 'data-key'): string {
  return JSON.stringify(['aileron/secret', part, ctx.organizationId, ctx.workspaceId, ctx.path, ctx.version]);
}

/** AAD for a workspace key sealed by the root key. */
export function workspaceKeyAad(organizationId: string, workspaceId: string, keyVersion: number): string {
  return JSON.stringify(['aileron/workspace-key', organizationId, workspaceId, keyVersion]);
}

/** Envelope encryption: a fresh data key per version, wrapped by the workspace key. */
export function encryptSecret(workspaceKey: Buffer, value: string, ctx: SecretContext): SealedSecret {
  const dataKey = newKey();
  try {
    return {
      ciphertext: seal(dataKey, Buffer.from(value, 'utf8'), secretAad(ctx, 'value')),
      wrappedDataKey: seal(workspaceKey, dataKey, secretAad(ctx, 'data-key')),
    };
  } finally {
    dataKey.fill(0);
  }
}

export function decryptSecret(workspaceKey: Buffer, sealed: SealedSecret, ctx: SecretContext): string {
  const dataKey = open(workspaceKey, sealed.wrappedDataKey, secretAad(ctx, 'data-key'));
  try {
    return open(dataKey, sealed.ciphertext, secretAad(ctx, 'value')).toString('utf8');
  } finally {
    dataKey.fill(0);
  }
}

/** Workspace key rotation: the data key moves to the new workspace key; the value is not touched. */
export function rewrapDataKey(from: Buffer, to: Buffer, wrappedDataKey: string, ctx: SecretContext): string {
  const dataKey = open(from, wrappedDataKey, secretAad(ctx, 'data-key'));
  try {
    return seal(to, dataKey, secretAad(ctx, 'data-key'));
  } finally {
    dataKey.fill(0);
  }
}
