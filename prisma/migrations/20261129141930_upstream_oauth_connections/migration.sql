-- CreateTable
CREATE TABLE "vault_sealed_values" (
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "id" TEXT NOT NULL,
    "generation" INTEGER NOT NULL,
    "ciphertext" TEXT NOT NULL,
    "wrapped_data_key" TEXT NOT NULL,
    "key_version" INTEGER NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "vault_sealed_values_pkey" PRIMARY KEY ("workspace_id","id")
);

-- CreateTable
CREATE TABLE "upstream_connections" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "server" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "user_id" UUID,
    "state" TEXT NOT NULL,
    "upstream" JSONB NOT NULL,
    "scope" TEXT,
    "access_expires_at" TIMESTAMPTZ(3),
    "has_refresh_token" BOOLEAN NOT NULL,
    "generation" INTEGER NOT NULL DEFAULT 1,
    "refresh_lease_until" TIMESTAMPTZ(3),
    "refresh_lease_holder" TEXT,
    "last_refreshed_at" TIMESTAMPTZ(3),
    "problem" TEXT,
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "connected_at" TIMESTAMPTZ(3) NOT NULL,
    "last_used_at" TIMESTAMPTZ(3),

    CONSTRAINT "upstream_connections_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "upstream_connection_starts" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "server" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "user_id" UUID NOT NULL,
    "state_hash" TEXT NOT NULL,
    "binding_hash" TEXT NOT NULL,
    "upstream" JSONB NOT NULL,
    "scope" TEXT,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "upstream_connection_starts_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "vault_sealed_values_workspace_id_key_version_idx" ON "vault_sealed_values"("workspace_id", "key_version");

-- CreateIndex
CREATE INDEX "upstream_connections_organization_id_workspace_id_created_a_idx" ON "upstream_connections"("organization_id", "workspace_id", "created_at");

-- CreateIndex
CREATE INDEX "upstream_connections_organization_id_user_id_idx" ON "upstream_connections"("organization_id", "user_id");

-- CreateIndex
CREATE UNIQUE INDEX "upstream_connections_organization_id_id_key" ON "upstream_connections"("organization_id", "id");

-- CreateIndex
CREATE UNIQUE INDEX "upstream_connections_organization_id_workspace_id_server_su_key" ON "upstream_connections"("organization_id", "workspace_id", "server", "subject");

-- CreateIndex
CREATE UNIQUE INDEX "upstream_connection_starts_state_hash_key" ON "upstream_connection_starts"("state_hash");

-- CreateIndex
CREATE INDEX "upstream_connection_starts_expires_at_idx" ON "upstream_connection_starts"("expires_at");

-- CreateIndex
CREATE UNIQUE INDEX "upstream_connection_starts_organization_id_id_key" ON "upstream_connection_starts"("organization_id", "id");

-- AddForeignKey
ALTER TABLE "vault_sealed_values" ADD CONSTRAINT "vault_sealed_values_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "upstream_connections" ADD CONSTRAINT "upstream_connections_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "upstream_connections" ADD CONSTRAINT "upstream_connections_organization_id_user_id_fkey" FOREIGN KEY ("organization_id", "user_id") REFERENCES "users"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "upstream_connection_starts" ADD CONSTRAINT "upstream_connection_starts_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;
