export { EventsModule } from './events.module';
export { matches as eventMatches } from './events.service';
