-- Edited after generation: IF NOT EXISTS, so that an app whose own migrations created this table earlier keeps it.
-- 1.0 dropped two indexes only one app used (on key, on created_at) from this file: databases migrated
-- before keep them (the journal applies 0000 by its date, not its content).
CREATE TABLE IF NOT EXISTS "idempotency_records" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"scope" text NOT NULL,
	"key" text NOT NULL,
	"route" text NOT NULL,
	"fingerprint" text NOT NULL,
	"status" text NOT NULL,
	"lease_token" uuid,
	"lease_expires_at" timestamp with time zone,
	"attempts" integer DEFAULT 1 NOT NULL,
	"request_id" text NOT NULL,
	"response_status" integer,
	"response_body" json,
	"response_headers" jsonb,
	"resource_type" text,
	"resource_id" text,
	"error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	CONSTRAINT "idempotency_records_scope_key_unique" UNIQUE("scope","key"),
	CONSTRAINT "idempotency_records_status_check" CHECK ("idempotency_records"."status" in ('processing', 'succeeded', 'failed'))
);
--> statement-breakpoint
CREATE INDEX IF NOT EXISTS "idempotency_records_expires_at_idx" ON "idempotency_records" USING btree ("expires_at");