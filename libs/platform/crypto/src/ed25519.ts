import { createPrivateKey, createPublicKey, generateKeyPairSync, KeyObject, sign, verify } from 'node:crypto';

export interface Ed25519KeyPair {
  /** PKCS#8 PEM */
  privateKeyPem: string;
  /** the raw 32-byte public key, base64url, as a JWK's `x` */
  publicKeyX: string;
}

export function generateEd25519(): Ed25519KeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicKeyX: publicX(publicKey),
  };
}

function publicX(key: KeyObject): string {
  const jwk = key.export({ format: 'jwk' }) as { x?: string };
  if (!jwk.x) throw new Error('not an Ed25519 key');
  return jwk.x;
}

export function privateKeyFromPem(pem: string): KeyObject {
  return createPrivateKey(pem);
}

export function publicKeyFromX(x: string): KeyObject {
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
}

/** Detached Ed25519 signature, base64url. */
export function signEd25519(key: KeyObject, message: string | Buffer): string {
  return sign(null, Buffer.from(message), key).toString('base64url');
}

export function verifyEd25519(key: KeyObject, message: string | Buffer, signature: string): boolean {
  try {
    return verify(null, Buffer.from(message), key, Buffer.from(signature, 'base64url'));
  } catch {
    return false;
  }
}
