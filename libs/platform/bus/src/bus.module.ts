import { Global, Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { RedisService } from '@aileron/redis';
import { InProcessBus, MESSAGE_BUS, MessageBus, RedisBus } from './message-bus';

/** Redis pub/sub where Redis is configured (RedisModule), an emitter otherwise. */
@Global()
@Module({
  providers: [
    {
      provide: MESSAGE_BUS,
      inject: [RedisService],
      useFactory: (redis: RedisService): MessageBus => (redis.configured ? new RedisBus(redis) : new InProcessBus()),
    },
  ],
  exports: [MESSAGE_BUS],
})
export class BusModule implements OnApplicationShutdown {
  constructor(@Inject(MESSAGE_BUS) private readonly bus: MessageBus) {}

  async onApplicationShutdown(): Promise<void> {
    await this.bus.close();
  }
}
