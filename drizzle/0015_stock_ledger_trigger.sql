-- The stock ledger moves the counts: each inserted stock_movements row applies its deltas to its
-- stock row, in the inserting statement's transaction. A movement skipped by ON CONFLICT DO NOTHING
-- (a settlement already made) moves nothing. The stock row's checks refuse a row that would oversell
-- (stock_reserved_within_on_hand) and fail the whole statement: an order reserves all or nothing.
CREATE FUNCTION stock_apply_movement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE stock
    SET on_hand = on_hand + NEW.on_hand_delta, reserved = reserved + NEW.reserved_delta, updated_at = now()
    WHERE tenant_id = NEW.tenant_id AND sku = NEW.sku;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'stock movement for untracked sku %', NEW.sku USING ERRCODE = '23503', CONSTRAINT = 'stock_movements_stock_exists';
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER stock_movements_apply AFTER INSERT ON stock_movements FOR EACH ROW EXECUTE FUNCTION stock_apply_movement();
