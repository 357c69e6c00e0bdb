-- The app's own indexes on nuxt-idempotency's table, which the module's migration no longer creates
-- (1.0): the evidence locker looks a key up without its scope (a webhook event id in any provider),
-- and the ops listing reads the newest records first. IF NOT EXISTS: deployments migrated before
-- 1.0 have them from the module's 0000_records, and this app's own earlier migrations created the table
-- and them too (before the module owned it).
CREATE INDEX IF NOT EXISTS "idempotency_records_key_idx" ON "idempotency_records" USING btree ("key");--> statement-breakpoint
CREATE INDEX IF NOT EXISTS "idempotency_records_created_at_idx" ON "idempotency_records" USING btree ("created_at");
