-- Fewer index entries per order and per job (docs/benchmarks.md, index entries): the duplicates audit
-- scans every order anyway, and the ops listing by status needs an index only for dead letters (the
-- other statuses have their partial indexes already).
DROP INDEX "jobs_status_kind_idx";--> statement-breakpoint
DROP INDEX "orders_created_at_idx";--> statement-breakpoint
CREATE INDEX "jobs_dead_letter_idx" ON "jobs" USING btree ("created_at") WHERE "jobs"."status" = 'dead_letter';