DROP INDEX "request_log_key_idx";--> statement-breakpoint
DROP INDEX "request_log_idempotency_key_idx";--> statement-breakpoint
DROP INDEX "request_log_client_request_id_idx";--> statement-breakpoint
CREATE INDEX "request_log_idempotency_key_idx" ON "request_log" USING btree ("idempotency_key") WHERE "request_log"."idempotency_key" is not null;--> statement-breakpoint
CREATE INDEX "request_log_client_request_id_idx" ON "request_log" USING btree ("client_request_id") WHERE "request_log"."client_request_id" is not null;