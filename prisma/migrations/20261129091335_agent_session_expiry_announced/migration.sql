-- AlterTable
ALTER TABLE "agent_sessions" ADD COLUMN     "expiry_announced_at" TIMESTAMPTZ(3);

-- CreateIndex
CREATE INDEX "agent_sessions_expiry_announced_at_ended_at_expires_at_idx" ON "agent_sessions"("expiry_announced_at", "ended_at", "expires_at");

-- Sessions that expired before the sweep existed were never announced and never will be: a
-- first sweep must not flood every subscriber with session.ended events from months ago
UPDATE "agent_sessions" SET "expiry_announced_at" = "expires_at" WHERE "ended_at" IS NULL AND "expires_at" <= now();
