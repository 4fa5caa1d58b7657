export * from './domain/caveat-token';
export { deriveKey } from './domain/macaroon';
