-- CreateTable
CREATE TABLE "oauth_entries" (
    "model" TEXT NOT NULL,
    "id" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "grant_id" TEXT,
    "uid" TEXT,
    "expires_at" TIMESTAMPTZ(3),
    "consumed_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "oauth_entries_pkey" PRIMARY KEY ("model","id")
);

-- CreateTable
CREATE TABLE "oauth_grants" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "user_id" UUID NOT NULL,
    "grant_id" TEXT NOT NULL,
    "client_id" TEXT NOT NULL,
    "client_name" TEXT,
    "registration" TEXT NOT NULL,
    "resource" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_used_at" TIMESTAMPTZ(3),

    CONSTRAINT "oauth_grants_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "oauth_settings" (
    "organization_id" UUID NOT NULL,
    "allow_dynamic_registration" BOOLEAN NOT NULL DEFAULT false,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "oauth_settings_pkey" PRIMARY KEY ("organization_id")
);

-- CreateIndex
CREATE INDEX "oauth_entries_grant_id_idx" ON "oauth_entries"("grant_id");

-- CreateIndex
CREATE INDEX "oauth_entries_model_uid_idx" ON "oauth_entries"("model", "uid");

-- CreateIndex
CREATE INDEX "oauth_entries_expires_at_idx" ON "oauth_entries"("expires_at");

-- CreateIndex
CREATE UNIQUE INDEX "oauth_grants_grant_id_key" ON "oauth_grants"("grant_id");

-- CreateIndex
CREATE INDEX "oauth_grants_organization_id_workspace_id_created_at_idx" ON "oauth_grants"("organization_id", "workspace_id", "created_at");

-- CreateIndex
CREATE INDEX "oauth_grants_organization_id_user_id_idx" ON "oauth_grants"("organization_id", "user_id");

-- CreateIndex
CREATE UNIQUE INDEX "oauth_grants_organization_id_id_key" ON "oauth_grants"("organization_id", "id");

-- AddForeignKey
ALTER TABLE "oauth_grants" ADD CONSTRAINT "oauth_grants_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "oauth_grants" ADD CONSTRAINT "oauth_grants_organization_id_user_id_fkey" FOREIGN KEY ("organization_id", "user_id") REFERENCES "users"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "oauth_settings" ADD CONSTRAINT "oauth_settings_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;
