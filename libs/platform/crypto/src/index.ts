export { seal, open, newKey, SealOpenError, KEY_BYTES } from './aes-gcm';
export { canonicalJson, sha256Hex, digestOf } from './canonical-json';
export { generateEd25519, privateKeyFromPem, publicKeyFromX, signEd25519, verifyEd25519 } from './ed25519';
export type { Ed25519KeyPair } from './ed25519';
