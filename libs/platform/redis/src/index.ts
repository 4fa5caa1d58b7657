export { RedisModule } from './redis.module';
export { RedisService, COMMAND_TIMEOUT_MS, within } from './redis.service';
export type { ConnectionKind, RedisSettings } from './redis.service';
export { RedisUnavailableError, REDIS_RETRY_AFTER_SECONDS } from './redis-unavailable.error';
