export { TenancyModule } from './tenancy.module';
export { TenancyService } from './tenancy.service';
export { BootstrapService } from './bootstrap.service';
export type { BootstrapResult } from './bootstrap.service';
