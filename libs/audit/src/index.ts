export { AuditModule } from './audit.module';
export { AuditService, actorOf } from './audit.service';
export type { AuditEntry, IngestResult } from './audit.service';
export { ingestBody, ingestView } from './audit.schemas';
export {
  GENESIS_HASH,
  canonicalRecord,
  recordHash,
  chainRecords,
  ChainVerifier,
  checkpointSigningInput,
} from './domain/chain';
export type { ChainedRecord, VerifyResult } from './domain/chain';
export type { CallCounts, RecordedCall, RecordedDecision } from './domain/recorded-call';
export {
  announcedExecution,
  clippedError,
  EXECUTION_DECISIONS,
  EXECUTION_NAME_MAX,
  callArgumentsSchema,
  nestsDeeperThan,
  RECORD_DEPTH_MAX,
  EXECUTION_TYPES,
  executionDataSchema,
  executionEventPayload,
  executionRecord,
  executionRecordSchema,
} from './domain/execution-record';
export type { ExecutionDecision, ExecutionRecord, ExecutionType } from './domain/execution-record';
