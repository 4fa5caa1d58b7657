-- AlterTable
ALTER TABLE "outbox_messages" ADD COLUMN     "audit_record_id" UUID;
