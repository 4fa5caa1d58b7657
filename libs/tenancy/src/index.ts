export { TenancyModule } from './tenancy.module';
export { TenancyService } from './tenancy.service';
export { BootstrapService, ADMIN_TOKEN_FILE } from './bootstrap.service';
export type { BootstrapResult } from './bootstrap.service';
