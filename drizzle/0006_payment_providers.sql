ALTER TABLE "orders" ADD COLUMN "payment_provider" text;--> statement-breakpoint
ALTER TABLE "orders" ADD COLUMN "payment_next_action" jsonb;--> statement-breakpoint
ALTER TABLE "orders" ADD COLUMN "payment_error" jsonb;--> statement-breakpoint
ALTER TABLE "orders" ADD COLUMN "payment_checked_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "webhook_events" ADD COLUMN "source" text DEFAULT 'webhook' NOT NULL;--> statement-breakpoint
ALTER TABLE "webhook_events" ADD COLUMN "confirmation" jsonb;--> statement-breakpoint
CREATE INDEX "orders_awaiting_payment_idx" ON "orders" USING btree ("updated_at") WHERE "orders"."status" = 'pending_payment' and "orders"."payment_intent_id" is not null;--> statement-breakpoint
ALTER TABLE "webhook_events" ADD CONSTRAINT "webhook_events_source_check" CHECK ("webhook_events"."source" in ('webhook', 'reconciliation'));