export * from './domain/caveat-token';
export { deriveKey } from './domain/macaroon';
export { CaveatTokenVerifier } from './domain/token-verifier';
export { SessionsModule } from './sessions.module';
export { SessionsService } from './sessions.service';
export { SessionKeys } from './session-keys.service';
