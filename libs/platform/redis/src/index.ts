export { RedisModule } from './redis.module';
export { RedisService } from './redis.service';
export type { ConnectionKind } from './redis.service';
export { RedisUnavailableError } from './redis-unavailable.error';
