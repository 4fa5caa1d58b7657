export { ApprovalsModule } from './approvals.module';
export { ApprovalsService, ApprovalError, LINK_PREFIX } from './approvals.service';
export type { ApprovalCall, CallApproval, Channel, DecisionWait } from './approvals.service';
export type { ApprovalRecord } from './approvals.repository';
export { argumentsDigest, redactArguments, tally } from './domain/approval';
export { onCall, resolveRoute, routingDocumentSchema } from './domain/routing';
