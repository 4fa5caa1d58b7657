import { Module } from '@nestjs/common';
import { ClockModule } from '@aileron/clock';
import { BootstrapService } from './bootstrap.service';
import { OrganizationsController } from './organizations.controller';
import { PeopleController } from './people.controller';
import { TenancyRepository } from './tenancy.repository';
import { TenancyService } from './tenancy.service';
import { WorkspacesController } from './workspaces.controller';

@Module({
  imports: [ClockModule],
  controllers: [OrganizationsController, WorkspacesController, PeopleController],
  providers: [TenancyRepository, TenancyService, BootstrapService],
  exports: [TenancyService, BootstrapService],
})
export class TenancyModule {}
