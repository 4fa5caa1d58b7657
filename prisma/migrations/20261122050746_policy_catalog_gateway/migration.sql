-- CreateEnum
CREATE TYPE "PolicyDefault" AS ENUM ('allow', 'deny');

-- AlterTable
ALTER TABLE "workspaces" ADD COLUMN     "policy_default" "PolicyDefault" NOT NULL DEFAULT 'deny';

-- CreateTable
CREATE TABLE "policy_versions" (
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "version" INTEGER NOT NULL,
    "document" JSONB NOT NULL,
    "digest" TEXT NOT NULL,
    "restored_from" INTEGER,
    "created_by" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "policy_versions_pkey" PRIMARY KEY ("workspace_id","version")
);

-- CreateTable
CREATE TABLE "catalog_entries" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "disabled_reason" TEXT,
    "disabled_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "catalog_entries_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "catalog_versions" (
    "organization_id" UUID NOT NULL,
    "entry_id" UUID NOT NULL,
    "version" TEXT NOT NULL,
    "definition" JSONB NOT NULL,
    "created_by" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "catalog_versions_pkey" PRIMARY KEY ("entry_id","version")
);

-- CreateTable
CREATE TABLE "workspace_servers" (
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "entry_id" UUID NOT NULL,
    "pinned_version" TEXT NOT NULL,
    "rollout_version" TEXT,
    "rollout_gateways" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "rollout_groups" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "rollout_percent" INTEGER NOT NULL DEFAULT 0,
    "updated_by" TEXT,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "workspace_servers_pkey" PRIMARY KEY ("workspace_id","entry_id")
);

-- CreateTable
CREATE TABLE "gateways" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "groups" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "token_hash" TEXT NOT NULL,
    "prefix" TEXT NOT NULL,
    "enrolled_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_seen_at" TIMESTAMPTZ(3),
    "revoked_at" TIMESTAMPTZ(3),

    CONSTRAINT "gateways_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "enrollment_codes" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "code_hash" TEXT NOT NULL,
    "groups" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "used_at" TIMESTAMPTZ(3),
    "gateway_id" UUID,
    "created_by" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "enrollment_codes_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "gateway_settings" (
    "organization_id" UUID NOT NULL,
    "allow_local_servers" BOOLEAN NOT NULL DEFAULT true,
    "offline_mode" TEXT NOT NULL DEFAULT 'cached',
    "max_stale_seconds" INTEGER NOT NULL DEFAULT 3600,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "gateway_settings_pkey" PRIMARY KEY ("organization_id")
);

-- CreateTable
CREATE TABLE "signing_keys" (
    "id" TEXT NOT NULL,
    "purpose" TEXT NOT NULL,
    "public_key" TEXT NOT NULL,
    "private_key" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "retired_at" TIMESTAMPTZ(3),

    CONSTRAINT "signing_keys_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "catalog_entries_organization_id_name_key" ON "catalog_entries"("organization_id", "name");

-- CreateIndex
CREATE UNIQUE INDEX "catalog_entries_organization_id_id_key" ON "catalog_entries"("organization_id", "id");

-- CreateIndex
CREATE UNIQUE INDEX "catalog_versions_organization_id_entry_id_version_key" ON "catalog_versions"("organization_id", "entry_id", "version");

-- CreateIndex
CREATE INDEX "workspace_servers_organization_id_entry_id_idx" ON "workspace_servers"("organization_id", "entry_id");

-- CreateIndex
CREATE UNIQUE INDEX "gateways_token_hash_key" ON "gateways"("token_hash");

-- CreateIndex
CREATE INDEX "gateways_workspace_id_enrolled_at_idx" ON "gateways"("workspace_id", "enrolled_at");

-- CreateIndex
CREATE UNIQUE INDEX "gateways_organization_id_id_key" ON "gateways"("organization_id", "id");

-- CreateIndex
CREATE UNIQUE INDEX "enrollment_codes_code_hash_key" ON "enrollment_codes"("code_hash");

-- CreateIndex
CREATE INDEX "enrollment_codes_workspace_id_created_at_idx" ON "enrollment_codes"("workspace_id", "created_at");

-- CreateIndex
CREATE INDEX "signing_keys_purpose_created_at_idx" ON "signing_keys"("purpose", "created_at");

-- AddForeignKey
ALTER TABLE "policy_versions" ADD CONSTRAINT "policy_versions_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "catalog_entries" ADD CONSTRAINT "catalog_entries_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "catalog_versions" ADD CONSTRAINT "catalog_versions_organization_id_entry_id_fkey" FOREIGN KEY ("organization_id", "entry_id") REFERENCES "catalog_entries"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "workspace_servers" ADD CONSTRAINT "workspace_servers_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "workspace_servers" ADD CONSTRAINT "workspace_servers_organization_id_entry_id_fkey" FOREIGN KEY ("organization_id", "entry_id") REFERENCES "catalog_entries"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "workspace_servers" ADD CONSTRAINT "workspace_servers_organization_id_entry_id_pinned_version_fkey" FOREIGN KEY ("organization_id", "entry_id", "pinned_version") REFERENCES "catalog_versions"("organization_id", "entry_id", "version") ON DELETE NO ACTION ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "workspace_servers" ADD CONSTRAINT "workspace_servers_organization_id_entry_id_rollout_version_fkey" FOREIGN KEY ("organization_id", "entry_id", "rollout_version") REFERENCES "catalog_versions"("organization_id", "entry_id", "version") ON DELETE NO ACTION ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "gateways" ADD CONSTRAINT "gateways_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "enrollment_codes" ADD CONSTRAINT "enrollment_codes_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "gateway_settings" ADD CONSTRAINT "gateway_settings_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;
