export * from './domain/catalog-entry';
export * from './domain/config-merge';
export * from './domain/rollout';
export * from './domain/tool-names';
export { forbiddenVariables, injectionRisk } from './domain/environment';
export { CatalogModule } from './catalog.module';
export { CatalogService } from './catalog.service';
export type { RolloutInput } from './catalog.service';
export type {
  AssignmentRecord,
  CatalogEntryRecord,
  CatalogVersionRecord,
  ServerDefinition,
} from './catalog.repository';
