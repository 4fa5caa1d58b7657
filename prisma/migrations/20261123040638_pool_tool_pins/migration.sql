-- CreateTable
CREATE TABLE "tool_pins" (
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "server" TEXT NOT NULL,
    "version" TEXT NOT NULL,
    "tool" TEXT NOT NULL,
    "pinned_hash" TEXT NOT NULL,
    "changed_hash" TEXT,
    "changed_at" TIMESTAMPTZ(3),
    "accepted_by" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "tool_pins_pkey" PRIMARY KEY ("workspace_id","server","version","tool")
);

-- CreateTable
CREATE TABLE "pool_settings" (
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "block_changed_tools" BOOLEAN NOT NULL DEFAULT false,
    "updated_by" TEXT,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "pool_settings_pkey" PRIMARY KEY ("workspace_id")
);

-- CreateIndex
CREATE INDEX "tool_pins_organization_id_idx" ON "tool_pins"("organization_id");

-- CreateIndex
CREATE UNIQUE INDEX "pool_settings_organization_id_workspace_id_key" ON "pool_settings"("organization_id", "workspace_id");

-- AddForeignKey
ALTER TABLE "tool_pins" ADD CONSTRAINT "tool_pins_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "pool_settings" ADD CONSTRAINT "pool_settings_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;
