-- AlterTable
ALTER TABLE "gateways" ADD COLUMN     "enrolled_by" TEXT;

-- AlterTable
ALTER TABLE "users" ADD COLUMN     "deactivated_at" TIMESTAMPTZ(3);

-- CreateIndex
CREATE INDEX "api_tokens_organization_id_created_by_idx" ON "api_tokens"("organization_id", "created_by");

-- CreateIndex
CREATE INDEX "gateways_organization_id_enrolled_by_idx" ON "gateways"("organization_id", "enrolled_by");

-- Gateways enrolled before the column existed: whoever made the code each one used, which the code remembers
UPDATE "gateways" g SET "enrolled_by" = c."created_by"
  FROM "enrollment_codes" c
 WHERE c."gateway_id" = g."id" AND c."organization_id" = g."organization_id";
