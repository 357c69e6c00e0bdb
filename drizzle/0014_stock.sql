CREATE TABLE "stock" (
	"tenant_id" text NOT NULL,
	"sku" text NOT NULL,
	"on_hand" bigint NOT NULL,
	"reserved" bigint DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "stock_pkey" PRIMARY KEY("tenant_id","sku"),
	CONSTRAINT "stock_counts_non_negative" CHECK ("stock"."on_hand" >= 0 and "stock"."reserved" >= 0),
	CONSTRAINT "stock_reserved_within_on_hand" CHECK ("stock"."reserved" <= "stock"."on_hand")
);
--> statement-breakpoint
CREATE TABLE "stock_movements" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"tenant_id" text NOT NULL,
	"sku" text NOT NULL,
	"kind" text NOT NULL,
	"source_type" text NOT NULL,
	"source_id" text NOT NULL,
	"order_id" text,
	"quantity" bigint NOT NULL,
	"on_hand_delta" bigint NOT NULL,
	"reserved_delta" bigint NOT NULL,
	"reason" text,
	"request_id" text,
	"job_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "stock_movements_once" UNIQUE("tenant_id","source_id","sku","kind"),
	CONSTRAINT "stock_movements_kind_check" CHECK ("stock_movements"."kind" in ('reserve', 'commit', 'release', 'restock', 'adjust', 'set')),
	CONSTRAINT "stock_movements_source_type_check" CHECK ("stock_movements"."source_type" in ('order', 'refund', 'adjustment', 'count')),
	CONSTRAINT "stock_movements_quantity_positive" CHECK ("stock_movements"."quantity" > 0)
);
--> statement-breakpoint
ALTER TABLE "orders" ADD COLUMN "cancel_reason" text;--> statement-breakpoint
ALTER TABLE "stock" ADD CONSTRAINT "stock_tenant_id_tenants_id_fk" FOREIGN KEY ("tenant_id") REFERENCES "public"."tenants"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "stock_movements_settled_once" ON "stock_movements" USING btree ("tenant_id","source_id","sku") WHERE "stock_movements"."kind" in ('commit', 'release');--> statement-breakpoint
CREATE INDEX "stock_movements_sku_idx" ON "stock_movements" USING btree ("tenant_id","sku","id");--> statement-breakpoint
CREATE INDEX "stock_movements_order_idx" ON "stock_movements" USING btree ("order_id") WHERE "stock_movements"."order_id" is not null;--> statement-breakpoint
CREATE INDEX "orders_unpaid_idx" ON "orders" USING btree ("created_at") WHERE "orders"."status" in ('pending_payment', 'payment_failed');--> statement-breakpoint
ALTER TABLE "orders" ADD CONSTRAINT "orders_cancel_reason_check" CHECK ("orders"."cancel_reason" in ('requested', 'expired'));