import { Injectable } from '@nestjs/common';
import type { JobProcessor } from './job';

/**
 * Every job processor the process knows. Domains register theirs at module
 * init; enqueueing a job nobody processes fails at once instead of rotting.
 */
@Injectable()
export class JobRegistry {
  private readonly processors = new Map<string, JobProcessor>();

  register(processor: JobProcessor): void {
    if (this.processors.has(processor.name)) throw new Error(`job "${processor.name}" registered twice`);
    this.processors.set(processor.name, processor);
  }

  has(name: string): boolean {
    return this.processors.has(name);
  }

  all(): JobProcessor[] {
    return [...this.processors.values()];
  }
}
