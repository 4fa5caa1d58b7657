-- CreateTable
CREATE TABLE "approval_requests" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "requester" TEXT NOT NULL,
    "requested_by" TEXT NOT NULL,
    "gateway_id" UUID,
    "session_id" TEXT,
    "server" TEXT NOT NULL,
    "tool" TEXT NOT NULL,
    "arguments" JSONB NOT NULL,
    "arguments_digest" TEXT NOT NULL,
    "execution_mode" TEXT NOT NULL,
    "policy_version" INTEGER NOT NULL,
    "rules" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "route" TEXT NOT NULL,
    "quorum" INTEGER NOT NULL DEFAULT 1,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "decided_at" TIMESTAMPTZ(3),
    "decision_reason" TEXT,
    "consumed_at" TIMESTAMPTZ(3),

    CONSTRAINT "approval_requests_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "approval_decisions" (
    "approval_id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "approver" TEXT NOT NULL,
    "decision" TEXT NOT NULL,
    "reason" TEXT,
    "via" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "approval_decisions_pkey" PRIMARY KEY ("approval_id","approver")
);

-- CreateTable
CREATE TABLE "approval_links" (
    "token_hash" TEXT NOT NULL,
    "approval_id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "user_id" UUID NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "used_at" TIMESTAMPTZ(3),

    CONSTRAINT "approval_links_pkey" PRIMARY KEY ("token_hash")
);

-- CreateTable
CREATE TABLE "approval_routing" (
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "document" JSONB NOT NULL,
    "version" INTEGER NOT NULL,
    "updated_by" TEXT,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "approval_routing_pkey" PRIMARY KEY ("workspace_id")
);

-- CreateTable
CREATE TABLE "webhook_endpoints" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "workspace_id" UUID,
    "name" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "secret" TEXT NOT NULL,
    "events" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "format" TEXT NOT NULL DEFAULT 'json',
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "paused_at" TIMESTAMPTZ(3),
    "paused_reason" TEXT,
    "failing_since" TIMESTAMPTZ(3),
    "created_by" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhook_endpoints_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "webhook_deliveries" (
    "id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "endpoint_id" UUID NOT NULL,
    "event_id" TEXT NOT NULL,
    "event_type" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "last_status" INTEGER,
    "last_error" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_attempt_at" TIMESTAMPTZ(3),
    "delivered_at" TIMESTAMPTZ(3),

    CONSTRAINT "webhook_deliveries_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "webhook_attempts" (
    "delivery_id" UUID NOT NULL,
    "organization_id" UUID NOT NULL,
    "attempt" INTEGER NOT NULL,
    "status" INTEGER,
    "error" TEXT,
    "duration_ms" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "webhook_attempts_pkey" PRIMARY KEY ("delivery_id","attempt")
);

-- CreateIndex
CREATE INDEX "approval_requests_workspace_id_status_created_at_idx" ON "approval_requests"("workspace_id", "status", "created_at");

-- CreateIndex
CREATE INDEX "approval_requests_status_expires_at_idx" ON "approval_requests"("status", "expires_at");

-- CreateIndex
CREATE UNIQUE INDEX "approval_requests_organization_id_id_key" ON "approval_requests"("organization_id", "id");

-- CreateIndex
CREATE INDEX "approval_links_approval_id_idx" ON "approval_links"("approval_id");

-- CreateIndex
CREATE UNIQUE INDEX "approval_routing_organization_id_workspace_id_key" ON "approval_routing"("organization_id", "workspace_id");

-- CreateIndex
CREATE UNIQUE INDEX "webhook_endpoints_organization_id_name_key" ON "webhook_endpoints"("organization_id", "name");

-- CreateIndex
CREATE UNIQUE INDEX "webhook_endpoints_organization_id_id_key" ON "webhook_endpoints"("organization_id", "id");

-- CreateIndex
CREATE INDEX "webhook_deliveries_endpoint_id_created_at_idx" ON "webhook_deliveries"("endpoint_id", "created_at");

-- CreateIndex
CREATE UNIQUE INDEX "webhook_deliveries_endpoint_id_event_id_key" ON "webhook_deliveries"("endpoint_id", "event_id");

-- CreateIndex
CREATE UNIQUE INDEX "webhook_deliveries_organization_id_id_key" ON "webhook_deliveries"("organization_id", "id");

-- AddForeignKey
ALTER TABLE "approval_requests" ADD CONSTRAINT "approval_requests_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "approval_decisions" ADD CONSTRAINT "approval_decisions_organization_id_approval_id_fkey" FOREIGN KEY ("organization_id", "approval_id") REFERENCES "approval_requests"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "approval_links" ADD CONSTRAINT "approval_links_organization_id_approval_id_fkey" FOREIGN KEY ("organization_id", "approval_id") REFERENCES "approval_requests"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "approval_routing" ADD CONSTRAINT "approval_routing_organization_id_workspace_id_fkey" FOREIGN KEY ("organization_id", "workspace_id") REFERENCES "workspaces"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "webhook_endpoints_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_organization_id_endpoint_id_fkey" FOREIGN KEY ("organization_id", "endpoint_id") REFERENCES "webhook_endpoints"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "webhook_attempts" ADD CONSTRAINT "webhook_attempts_organization_id_delivery_id_fkey" FOREIGN KEY ("organization_id", "delivery_id") REFERENCES "webhook_deliveries"("organization_id", "id") ON DELETE CASCADE ON UPDATE CASCADE;
