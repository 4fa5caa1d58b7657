-- AlterTable
ALTER TABLE "webhook_deliveries" ADD COLUMN     "sending_run" TEXT,
ADD COLUMN     "sending_since" TIMESTAMPTZ(3);

-- CreateIndex
CREATE INDEX "webhook_deliveries_status_id_idx" ON "webhook_deliveries"("status", "id");
