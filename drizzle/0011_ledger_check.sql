CREATE TABLE "ledger_checks" (
	"order_id" text PRIMARY KEY NOT NULL,
	"checked_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "ledger_discrepancies" (
	"id" text PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"order_id" text NOT NULL,
	"tenant_id" text NOT NULL,
	"provider" text NOT NULL,
	"status" text DEFAULT 'open' NOT NULL,
	"summary" text NOT NULL,
	"ours" jsonb NOT NULL,
	"theirs" jsonb NOT NULL,
	"resolution" text,
	"resolved_by" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_seen_at" timestamp with time zone DEFAULT now() NOT NULL,
	"resolved_at" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "ledger_discrepancies_kind_check" CHECK ("ledger_discrepancies"."kind" in ('wrong_amount_captured', 'payment_not_recorded', 'payment_not_at_provider', 'canceled_refund_failed', 'refund_not_at_provider', 'refund_succeeded_at_provider', 'refund_amount_mismatch')),
	CONSTRAINT "ledger_discrepancies_status_check" CHECK ("ledger_discrepancies"."status" in ('open', 'resolved'))
);
--> statement-breakpoint
ALTER TABLE "ledger_checks" ADD CONSTRAINT "ledger_checks_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ledger_discrepancies" ADD CONSTRAINT "ledger_discrepancies_order_id_orders_id_fk" FOREIGN KEY ("order_id") REFERENCES "public"."orders"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "ledger_checks_checked_at_idx" ON "ledger_checks" USING btree ("checked_at");--> statement-breakpoint
CREATE UNIQUE INDEX "ledger_discrepancies_open_unique" ON "ledger_discrepancies" USING btree ("order_id","kind") WHERE "ledger_discrepancies"."status" = 'open';--> statement-breakpoint
CREATE INDEX "ledger_discrepancies_order_idx" ON "ledger_discrepancies" USING btree ("order_id");--> statement-breakpoint
CREATE INDEX "ledger_discrepancies_status_idx" ON "ledger_discrepancies" USING btree ("status","created_at");--> statement-breakpoint
CREATE INDEX "refunds_updated_at_idx" ON "refunds" USING btree ("updated_at");