-- The records that are tool calls (libs/audit/src/domain/recorded-call.ts), by chain and time: the
-- overview counts them per minute or hour and a policy replay reads them in order, each over a
-- bounded range of one chain, without visiting the chain's other records. A partial index Prisma's
-- schema cannot describe; its predicate is the repository's CALL_RECORD, word for word, so the
-- planner can prove a query's condition implies it.
CREATE INDEX "audit_events_call_records_idx" ON "audit_events" ("chain_id", "occurred_at", "seq", "organization_id", "type", "decision")
WHERE ((source = 'pool' AND ((type = 'execution.started' AND decision = 'allow') OR (type = 'execution.failed' AND decision = 'deny')))
  OR (source = 'gateway' AND decision IN ('allow', 'deny') AND type <> 'execution.started')
  OR (type = 'approval.requested' AND COALESCE(data->'rules'->>0, '') NOT LIKE 'shell:%'));
