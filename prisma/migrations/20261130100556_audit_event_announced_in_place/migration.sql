-- AlterTable
ALTER TABLE "audit_events" ADD COLUMN     "event_id" BIGINT;

-- CreateIndex
CREATE INDEX "audit_events_chain_id_event_id_idx" ON "audit_events"("chain_id", "event_id");
