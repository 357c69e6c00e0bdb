CREATE TABLE "operator_actions" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"action" text NOT NULL,
	"tenant_id" text NOT NULL,
	"subject_id" text NOT NULL,
	"request_id" text,
	"detail" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "last_used_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "request_log" ADD COLUMN "client_request_id" text;--> statement-breakpoint
ALTER TABLE "request_log" ADD COLUMN "authenticated_by" text;--> statement-breakpoint
CREATE INDEX "operator_actions_tenant_idx" ON "operator_actions" USING btree ("tenant_id");--> statement-breakpoint
CREATE INDEX "operator_actions_subject_idx" ON "operator_actions" USING btree ("subject_id");--> statement-breakpoint
CREATE INDEX "operator_actions_request_id_idx" ON "operator_actions" USING btree ("request_id");--> statement-breakpoint
CREATE INDEX "api_keys_tenant_idx" ON "api_keys" USING btree ("tenant_id");--> statement-breakpoint
CREATE INDEX "request_log_client_request_id_idx" ON "request_log" USING btree ("client_request_id");