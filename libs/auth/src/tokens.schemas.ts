import { z } from 'zod';
import { ROLES } from './domain/roles';

export const slug = z
  .string()
  .regex(
    /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/,
    'must be 1-63 lowercase letters, digits or dashes, not starting or ending with a dash',
  );
export const uuid = z.uuid({ message: 'must be a UUID' });
export const role = z.enum(ROLES, { message: `must be one of ${ROLES.join(', ')}` });

export const createTokenBody = z
  .object({
    name: z.string().trim().min(1).max(100),
    role,
    workspace: slug.optional().describe('restrict the token to this workspace'),
    expires_in_seconds: z
      .number()
      .int()
      .min(60)
      .max(10 * 365 * 24 * 3600)
      .optional()
      .describe('omit for a token that does not expire'),
  })
  .strict();
export type CreateTokenBody = z.infer<typeof createTokenBody>;

export const tokenView = z.object({
  id: z.string(),
  name: z.string(),
  role,
  workspace: z.string().nullable(),
  prefix: z.string().describe('the first characters of the token, to tell tokens apart'),
  created_by: z.string().nullable(),
  created_at: z.string(),
  expires_at: z.string().nullable(),
  last_used_at: z.string().nullable(),
  revoked_at: z.string().nullable(),
});
export type TokenView = z.infer<typeof tokenView>;

export const createdToken = tokenView.extend({ token: z.string().describe('shown once; store it now') });

export const tokenIdParams = z.object({ id: uuid });
