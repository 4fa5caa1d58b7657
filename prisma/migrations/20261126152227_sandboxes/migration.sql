-- CreateTable
CREATE TABLE "sandboxes" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "network" TEXT NOT NULL DEFAULT 'none',
    "limits" JSONB NOT NULL DEFAULT '{}',
    "source" TEXT NOT NULL DEFAULT 'empty',
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_used_at" TIMESTAMPTZ(3),

    CONSTRAINT "sandboxes_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "sandbox_snapshots" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "sandbox_id" UUID NOT NULL,
    "sha" TEXT NOT NULL,
    "trigger" TEXT NOT NULL,
    "message" TEXT NOT NULL,
    "files" JSONB NOT NULL,
    "agent_session_id" UUID,
    "author" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "sandbox_snapshots_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "shell_rules" (
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "rules" JSONB NOT NULL,
    "elicitation" BOOLEAN NOT NULL DEFAULT false,
    "version" INTEGER NOT NULL DEFAULT 1,
    "updated_by" TEXT,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "shell_rules_pkey" PRIMARY KEY ("workspace_id")
);

-- CreateIndex
CREATE UNIQUE INDEX "sandboxes_organization_id_id_key" ON "sandboxes"("organization_id", "id");

-- CreateIndex
CREATE UNIQUE INDEX "sandboxes_workspace_id_name_key" ON "sandboxes"("workspace_id", "name");

-- CreateIndex
CREATE INDEX "sandbox_snapshots_sandbox_id_created_at_idx" ON "sandbox_snapshots"("sandbox_id", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "sandbox_snapshots_sandbox_id_sha_key" ON "sandbox_snapshots"("sandbox_id", "sha");

-- CreateIndex
CREATE UNIQUE INDEX "shell_rules_organization_id_workspace_id_key" ON "shell_rules"("organization_id", "workspace_id");

-- AddForeignKey
ALTER TABLE "sandboxes" ADD CONSTRAINT "sandboxes_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "sandbox_snapshots" ADD CONSTRAINT "sandbox_snapshots_organization_id_sandbox_id_fkey" FOREIGN KEY ("organization_id", "sandbox_id") REFERENCES "sandboxes"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "shell_rules" ADD CONSTRAINT "shell_rules_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;
