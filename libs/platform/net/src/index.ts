export {
  checkOutboundUrl,
  guardedLookup,
  isAddressAllowed,
  outboundPolicyOf,
  parseCidrList,
  OutboundUrlRefusedError,
  RefusedAddressError,
} from './ssrf-guard';
export type { AddressVerdict, HostLookup, OutboundPolicy } from './ssrf-guard';
export {
  signPayload,
  signatureHeaders,
  verifySignedPayload,
  DEFAULT_TOLERANCE_SECONDS,
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
} from './signed-payload';
export type { SignatureVerdict } from './signed-payload';
export { postSigned } from './outbound-post';
export type { SendOptions, SendOutcome } from './outbound-post';
export { EGRESS_EXCEPT_V4, EGRESS_EXCEPT_V6 } from './egress-ranges';
