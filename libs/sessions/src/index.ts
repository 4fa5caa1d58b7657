export * from './domain/caveat-token';
export { deriveKey } from './domain/macaroon';
export { CaveatTokenVerifier } from './domain/token-verifier';
export { SessionsModule } from './agent-sessions.module';
export { SessionsService } from './agent-sessions.service';
export { SessionKeys } from './agent-session-keys.service';
