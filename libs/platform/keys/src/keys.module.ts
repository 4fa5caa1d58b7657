import { Global, Logger, Module } from '@nestjs/common';
import { ClockModule } from '@aileron/clock';
import { APP_CONFIG, AppConfig } from '@aileron/config';
import { InstallationKeysRepository } from './installation-keys.repository';
import { InstallationKeys } from './installation-keys.service';
import { ROOT_KEYS, rootKeysFromConfig } from './root-keys';
import { SigningKeysRepository } from './signing-keys.repository';
import { SigningKeysService } from './signing-keys.service';

/** The root keyring, the signing keys and the installation keys, for every domain that seals or signs. */
@Global()
@Module({
  imports: [ClockModule],
  providers: [
    {
      provide: ROOT_KEYS,
      inject: [APP_CONFIG],
      useFactory: (config: AppConfig) => rootKeysFromConfig(config, (line) => new Logger('Keys').warn(line)),
    },
    SigningKeysRepository,
    SigningKeysService,
    InstallationKeysRepository,
    InstallationKeys,
  ],
  exports: [ROOT_KEYS, SigningKeysService, InstallationKeys],
})
export class KeysModule {}
