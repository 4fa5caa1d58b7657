import { DynamicModule, Global, Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { InProcessBus, MESSAGE_BUS, MessageBus, RedisBus } from './message-bus';

@Global()
@Module({})
export class BusModule implements OnApplicationShutdown {
  constructor(@Inject(MESSAGE_BUS) private readonly bus: MessageBus) {}

  static forRoot(redisUrl: string | undefined, prefix = 'aileron'): DynamicModule {
    return {
      module: BusModule,
      providers: [{ provide: MESSAGE_BUS, useFactory: (): MessageBus => (redisUrl ? new RedisBus(redisUrl, prefix) : new InProcessBus()) }],
      exports: [MESSAGE_BUS],
    };
  }

  async onApplicationShutdown(): Promise<void> {
    await this.bus.close();
  }
}
