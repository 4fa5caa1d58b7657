-- AlterTable
ALTER TABLE "enrollment_codes" ADD COLUMN     "token_expires_in_seconds" INTEGER;
