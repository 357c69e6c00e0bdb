CREATE TABLE "order_status_history" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"order_id" text NOT NULL,
	"from_status" text NOT NULL,
	"requested_status" text,
	"to_status" text NOT NULL,
	"outcome" text NOT NULL,
	"reason" text,
	"webhook_event_id" text,
	"job_id" text,
	"request_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_events" (
	"id" text PRIMARY KEY NOT NULL,
	"provider" text NOT NULL,
	"event_id" text NOT NULL,
	"type" text NOT NULL,
	"order_id" text NOT NULL,
	"payment_id" text,
	"amount" bigint,
	"currency" text,
	"raw_body" text NOT NULL,
	"signature_headers" jsonb NOT NULL,
	"status" text DEFAULT 'received' NOT NULL,
	"request_id" text NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL,
	"processed_at" timestamp with time zone,
	CONSTRAINT "webhook_events_provider_event_unique" UNIQUE("provider","event_id"),
	CONSTRAINT "webhook_events_status_check" CHECK ("webhook_events"."status" in ('received', 'applied', 'ignored'))
);
--> statement-breakpoint
ALTER TABLE "payment_intents" ADD COLUMN "events" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
CREATE INDEX "order_status_history_order_idx" ON "order_status_history" USING btree ("order_id");--> statement-breakpoint
CREATE INDEX "order_status_history_webhook_event_idx" ON "order_status_history" USING btree ("webhook_event_id");--> statement-breakpoint
CREATE INDEX "webhook_events_order_idx" ON "webhook_events" USING btree ("order_id");