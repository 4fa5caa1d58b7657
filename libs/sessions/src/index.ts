export * from './domain/caveat-token';
export { deriveKey } from './domain/macaroon';
export { CaveatTokenVerifier } from './domain/caveat-token-verifier';
export { AgentSessionsModule } from './agent-sessions.module';
export { AgentSessionsService } from './agent-sessions.service';
export { AgentSessionKeys } from './agent-session-keys.service';
