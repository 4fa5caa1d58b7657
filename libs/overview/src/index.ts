export { OverviewModule } from './overview.module';
export { OVERVIEW_WINDOWS } from './domain/overview-window';
export type { OverviewWindow } from './domain/overview-window';
