import { Module } from '@nestjs/common';
import { ClockModule } from '@aileron/clock';
import { CatalogController, WorkspaceServersController } from './catalog.controller';
import { CatalogRepository } from './catalog.repository';
import { CatalogService } from './catalog.service';

@Module({
  imports: [ClockModule],
  controllers: [CatalogController, WorkspaceServersController],
  providers: [CatalogRepository, CatalogService],
  exports: [CatalogService],
})
export class CatalogModule {}
