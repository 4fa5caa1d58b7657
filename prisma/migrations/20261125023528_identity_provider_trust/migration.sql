-- AlterTable
ALTER TABLE "identity_providers" ADD COLUMN     "allow_any_audience" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "trust_unverified_email" BOOLEAN NOT NULL DEFAULT false;
