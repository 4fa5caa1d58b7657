-- AlterTable
ALTER TABLE "approval_requests" ADD COLUMN     "agent_session_id" UUID;

-- CreateTable
CREATE TABLE "agent_sessions" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "name" TEXT,
    "agent" TEXT,
    "caps" TEXT[],
    "caveats" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "creator_kind" TEXT NOT NULL,
    "creator_id" UUID NOT NULL,
    "key_id" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "ended_at" TIMESTAMPTZ(3),
    "ended_by" TEXT,

    CONSTRAINT "agent_sessions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "session_messages" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "session_id" UUID NOT NULL,
    "direction" TEXT NOT NULL,
    "text" TEXT NOT NULL,
    "level" TEXT NOT NULL DEFAULT 'info',
    "author" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "session_messages_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "session_root_keys" (
    "organization_id" UUID NOT NULL,
    "key_id" TEXT NOT NULL,
    "sealed" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "retired_at" TIMESTAMPTZ(3),

    CONSTRAINT "session_root_keys_pkey" PRIMARY KEY ("organization_id","key_id")
);

-- CreateIndex
CREATE INDEX "agent_sessions_workspace_id_created_at_idx" ON "agent_sessions"("workspace_id", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "agent_sessions_organization_id_id_key" ON "agent_sessions"("organization_id", "id");

-- CreateIndex
CREATE INDEX "session_messages_session_id_created_at_idx" ON "session_messages"("session_id", "created_at");

-- AddForeignKey
ALTER TABLE "agent_sessions" ADD CONSTRAINT "agent_sessions_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "session_messages" ADD CONSTRAINT "session_messages_organization_id_session_id_fkey" FOREIGN KEY ("organization_id", "session_id") REFERENCES "agent_sessions"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "session_root_keys" ADD CONSTRAINT "session_root_keys_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;
