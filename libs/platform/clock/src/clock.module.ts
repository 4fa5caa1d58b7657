import { Module } from '@nestjs/common';
import { Clock } from './clock';

/**
 * Imported by each module whose services read the clock; Nest makes one
 * instance of it for the process, so a test that moves the clock moves every
 * reader at once.
 */
@Module({ providers: [Clock], exports: [Clock] })
export class ClockModule {}
