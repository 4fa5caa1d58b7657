-- AlterTable
-- An organisation that saved its settings chose its mode and keeps it; one that never did has no row and now gets fail_closed (ADR-0001's enterprise default)
ALTER TABLE "gateway_settings" ALTER COLUMN "offline_mode" SET DEFAULT 'fail_closed';

-- AlterTable
ALTER TABLE "gateways" ADD COLUMN     "previous_token_hash" TEXT,
ADD COLUMN     "previous_token_valid_until" TIMESTAMPTZ(3),
ADD COLUMN     "token_expires_at" TIMESTAMPTZ(3);

-- AlterTable
ALTER TABLE "secrets" ADD COLUMN     "deliver_to_gateways" BOOLEAN NOT NULL DEFAULT false;

-- CreateIndex
CREATE UNIQUE INDEX "gateways_previous_token_hash_key" ON "gateways"("previous_token_hash");
