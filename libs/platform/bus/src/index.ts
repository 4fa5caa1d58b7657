export { InProcessBus, RedisBus, MESSAGE_BUS } from './message-bus';
export type { MessageBus, BusHandler } from './message-bus';
export { BusModule } from './bus.module';
export { SharedCache } from './shared-cache';
export type { SharedCacheOptions } from './shared-cache';
export { Wakeups } from './wakeups';
