import { randomBytes } from 'node:crypto';

/**
 * Gateway tokens (`ail_gw_`) and enrolment codes (`ail_enr_`): 256 random
 * bits each, stored as sha256 only, recognisable by prefix so the guard knows
 * which resolver to ask and secret scanners can find leaked ones.
 */
export const GATEWAY_TOKEN_PREFIX = 'ail_gw_';
export const ENROLLMENT_CODE_PREFIX = 'ail_enr_';
const GATEWAY_TOKEN = /^ail_gw_[A-Za-z0-9_-]{43}$/;
const ENROLLMENT_CODE = /^ail_enr_[A-Za-z0-9_-]{43}$/;

export function mintGatewayToken(): string {
  return GATEWAY_TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export function mintEnrollmentCode(): string {
  return ENROLLMENT_CODE_PREFIX + randomBytes(32).toString('base64url');
}

export function looksLikeGatewayToken(token: string): boolean {
  return GATEWAY_TOKEN.test(token);
}

export function looksLikeEnrollmentCode(code: string): boolean {
  return ENROLLMENT_CODE.test(code);
}
