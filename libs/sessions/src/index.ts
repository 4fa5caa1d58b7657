export * from './domain/caveat-token';
export { deriveKey } from './domain/macaroon';
export { SessionsModule } from './sessions.module';
export { SessionsService } from './sessions.service';
export { SessionKeys } from './session-keys.service';
