CREATE TABLE "request_log_replays" (
	"idempotency_key" text NOT NULL,
	"scope" text NOT NULL,
	"minute" timestamp with time zone NOT NULL,
	"instance" text NOT NULL,
	"tenant_id" text,
	"method" text NOT NULL,
	"path" text NOT NULL,
	"status" integer NOT NULL,
	"replays" integer NOT NULL,
	"first_at" timestamp with time zone NOT NULL,
	"last_at" timestamp with time zone NOT NULL,
	CONSTRAINT "request_log_replays_pkey" PRIMARY KEY("idempotency_key","scope","minute","instance")
);
--> statement-breakpoint
CREATE INDEX "request_log_replays_minute_idx" ON "request_log_replays" USING btree ("minute");