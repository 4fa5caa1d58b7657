-- AlterTable
ALTER TABLE "organizations" ADD COLUMN     "audit_retention_days" INTEGER;

-- CreateTable
CREATE TABLE "vault_keys" (
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "version" INTEGER NOT NULL,
    "wrapped_key" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "retired_at" TIMESTAMPTZ(3),

    CONSTRAINT "vault_keys_pkey" PRIMARY KEY ("workspace_id","version")
);

-- CreateTable
CREATE TABLE "secrets" (
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "path" TEXT NOT NULL,
    "latest_version" INTEGER NOT NULL,
    "created_by" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_by" TEXT,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_read_by" TEXT,
    "last_read_at" TIMESTAMPTZ(3),

    CONSTRAINT "secrets_pkey" PRIMARY KEY ("workspace_id","path")
);

-- CreateTable
CREATE TABLE "secret_versions" (
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "path" TEXT NOT NULL,
    "version" INTEGER NOT NULL,
    "ciphertext" TEXT NOT NULL,
    "wrapped_data_key" TEXT NOT NULL,
    "key_version" INTEGER NOT NULL,
    "created_by" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "secret_versions_pkey" PRIMARY KEY ("workspace_id","path","version")
);

-- CreateTable
CREATE TABLE "audit_events" (
    "organization_id" UUID NOT NULL,
    "chain_id" UUID NOT NULL,
    "workspace_id" UUID,
    "seq" BIGINT NOT NULL,
    "id" UUID NOT NULL,
    "type" TEXT NOT NULL,
    "recorded_at" TIMESTAMPTZ(3) NOT NULL,
    "occurred_at" TIMESTAMPTZ(3) NOT NULL,
    "source" TEXT NOT NULL,
    "actor" TEXT,
    "principal" TEXT,
    "execution_mode" TEXT,
    "server" TEXT,
    "tool" TEXT,
    "decision" TEXT,
    "session_id" TEXT,
    "data" JSONB NOT NULL,
    "prev_hash" TEXT NOT NULL,
    "hash" TEXT NOT NULL,

    CONSTRAINT "audit_events_pkey" PRIMARY KEY ("chain_id","seq")
);

-- CreateTable
CREATE TABLE "audit_heads" (
    "chain_id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID,
    "seq" BIGINT NOT NULL,
    "hash" TEXT NOT NULL,
    "checkpoint_seq" BIGINT NOT NULL DEFAULT 0,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "audit_heads_pkey" PRIMARY KEY ("chain_id")
);

-- CreateTable
CREATE TABLE "audit_checkpoints" (
    "chain_id" UUID NOT NULL,
    "seq" BIGINT NOT NULL,
    "organization_id" UUID NOT NULL,
    "hash" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "key_id" TEXT NOT NULL,
    "signature" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "audit_checkpoints_pkey" PRIMARY KEY ("chain_id","seq")
);

-- CreateTable
CREATE TABLE "audit_sinks" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "secret" TEXT NOT NULL,
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "created_by" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_delivered_at" TIMESTAMPTZ(3),
    "last_error" TEXT,
    "last_error_at" TIMESTAMPTZ(3),
    "lease_until" TIMESTAMPTZ(3),

    CONSTRAINT "audit_sinks_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "audit_sink_cursors" (
    "sink_id" UUID NOT NULL,
    "chain_id" UUID NOT NULL,
    "seq" BIGINT NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "audit_sink_cursors_pkey" PRIMARY KEY ("sink_id","chain_id")
);

-- CreateIndex
CREATE UNIQUE INDEX "secrets_organization_id_workspace_id_path_key" ON "secrets"("organization_id", "workspace_id", "path");

-- CreateIndex
CREATE INDEX "secret_versions_workspace_id_key_version_idx" ON "secret_versions"("workspace_id", "key_version");

-- CreateIndex
CREATE INDEX "audit_events_chain_id_occurred_at_idx" ON "audit_events"("chain_id", "occurred_at");

-- CreateIndex
CREATE UNIQUE INDEX "audit_events_chain_id_id_key" ON "audit_events"("chain_id", "id");

-- CreateIndex
CREATE INDEX "audit_heads_organization_id_idx" ON "audit_heads"("organization_id");

-- CreateIndex
CREATE UNIQUE INDEX "audit_sinks_organization_id_name_key" ON "audit_sinks"("organization_id", "name");

-- CreateIndex
CREATE UNIQUE INDEX "audit_sinks_organization_id_id_key" ON "audit_sinks"("organization_id", "id");

-- AddForeignKey
ALTER TABLE "vault_keys" ADD CONSTRAINT "vault_keys_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "secrets" ADD CONSTRAINT "secrets_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "secret_versions" ADD CONSTRAINT "secret_versions_organization_id_workspace_id_path_fkey" FOREIGN KEY ("organization_id", "workspace_id", "path") REFERENCES "secrets"("organization_id", "workspace_id", "path") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "audit_sinks" ADD CONSTRAINT "audit_sinks_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "audit_sink_cursors" ADD CONSTRAINT "audit_sink_cursors_sink_id_fkey" FOREIGN KEY ("sink_id") REFERENCES "audit_sinks"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Audit records are append-only. Nothing updates or deletes them, except the
-- retention job, which marks its own transaction and removes whole old ranges.
CREATE FUNCTION audit_events_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND current_setting('aileron.audit_retention', true) = 'on' THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER audit_events_no_update_delete
  BEFORE UPDATE OR DELETE ON "audit_events"
  FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();

CREATE TRIGGER audit_events_no_truncate
  BEFORE TRUNCATE ON "audit_events"
  FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
