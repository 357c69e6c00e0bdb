-- Events (docs/events.md): written by triggers, so every path that changes an order, a refund or a
-- count (requests, jobs, webhooks, reconciliation, the ledger check's heal, expiry) writes its event
-- in its own transaction. The triggers are deferred to the commit: the object is then as GET
-- returns it after the transaction (an order's reservations, inserted after the order, included).

CREATE FUNCTION event_time(t timestamptz) RETURNS text LANGUAGE sql STABLE AS $$
  SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;
--> statement-breakpoint
-- A prefixed random id (122 random bits), as the app's own ids: URL-safe, self-describing.
CREATE FUNCTION event_random_id(prefix text) RETURNS text LANGUAGE sql VOLATILE AS $$
  SELECT prefix || '_' || translate(rtrim(encode(uuid_send(gen_random_uuid()), 'base64'), '='), '+/', '-_')
$$;
--> statement-breakpoint
-- GET /api/orders/{id}/refunds/{refundId}.
CREATE FUNCTION refund_event_object(r refunds) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('id', r.id, 'object', 'refund', 'orderId', r.order_id, 'amount', r.amount, 'currency', r.currency,
    'status', r.status, 'reason', r.reason, 'source', r.source, 'createdAt', event_time(r.created_at))
$$;
--> statement-breakpoint
-- GET /api/orders/{id} as its tenant reads it (server/orders/view.ts; tests/e2e/events-api.test.ts compares the two).
-- PL/pgSQL, not SQL: a SQL function with subqueries is never inlined and is planned again at every
-- call, which cost an order half its throughput; PL/pgSQL keeps the plan for the session.
CREATE FUNCTION order_event_object(order_id text) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (SELECT jsonb_build_object(
    'id', o.id, 'object', 'order', 'status', o.status, 'cartId', o.cart_id, 'currency', o.currency, 'amount', o.amount,
    'paymentMethod', o.payment_method, 'items', o.items, 'customer', o.customer, 'createdAt', event_time(o.created_at),
    'paymentIntentId', o.payment_intent_id,
    'payment', CASE WHEN o.payment_provider IS NULL THEN NULL ELSE jsonb_build_object(
      'provider', o.payment_provider, 'id', o.payment_intent_id, 'nextAction', o.payment_next_action,
      'error', CASE WHEN o.payment_error IS NULL THEN NULL ELSE jsonb_build_object('code', o.payment_error -> 'code', 'message', o.payment_error -> 'message') END,
      'status', CASE WHEN o.payment_error IS NULL THEN 'ready' ELSE 'refused' END) END,
    'cancelReason', o.cancel_reason,
    'amountRefunded', (SELECT coalesce(sum(r.amount), 0)::bigint FROM refunds r WHERE r.order_id = o.id AND r.status = 'succeeded'),
    'refunds', coalesce((SELECT jsonb_agg(refund_event_object(r) ORDER BY r.created_at, r.id) FROM refunds r WHERE r.order_id = o.id), '[]'::jsonb),
    'reservations', coalesce((SELECT jsonb_agg(jsonb_build_object('sku', m.sku, 'quantity', m.quantity, 'status', coalesce((
        SELECT CASE s.kind WHEN 'commit' THEN 'committed' ELSE 'released' END FROM stock_movements s
        WHERE s.tenant_id = m.tenant_id AND s.source_id = m.source_id AND s.sku = m.sku AND s.kind IN ('commit', 'release')), 'reserved')) ORDER BY m.sku)
      FROM stock_movements m WHERE m.order_id = o.id AND m.kind = 'reserve'), '[]'::jsonb))
    FROM orders o WHERE o.id = order_event_object.order_id);
END
$$;
--> statement-breakpoint
-- GET /api/inventory/{sku}.
CREATE FUNCTION stock_event_object(s stock) RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT jsonb_build_object('object', 'stock', 'sku', s.sku, 'onHand', s.on_hand, 'reserved', s.reserved,
    'available', s.on_hand - s.reserved, 'updatedAt', event_time(s.updated_at))
$$;
--> statement-breakpoint
-- One event, and one webhook.deliver job per enabled endpoint of its tenant subscribed to its type.
-- The sequence is the transaction's id shifted left 12 bits plus the event's place in the transaction
-- (a transaction-local counter): events of a transaction that commits later than a younger one's
-- still sort by their transaction's id, and GET /api/events lists only events below the oldest
-- running transaction's id (pg_snapshot_xmin), so a reader's cursor never passes an event still to commit.
CREATE FUNCTION record_event(tenant text, event_type text, object_id text, order_id text, object jsonb) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  place int := coalesce(nullif(current_setting('events.place', true), ''), '0')::int;
  event_id text := event_random_id('evt');
BEGIN
  IF place >= 4096 THEN
    RAISE EXCEPTION 'more than 4096 events in one transaction';
  END IF;
  PERFORM set_config('events.place', (place + 1)::text, true);
  INSERT INTO events (id, tenant_id, sequence, type, object_id, order_id, data)
    VALUES (event_id, tenant, (pg_current_xact_id()::text::bigint << 12) + place, event_type, object_id, order_id, object);
  INSERT INTO jobs (id, kind, dedupe_key, payload, max_attempts, resource_id)
    SELECT event_random_id('job'), 'webhook.deliver', event_id || ':' || e.id,
      jsonb_build_object('eventId', event_id, 'endpointId', e.id), 1000, 'webhook_endpoint:' || e.id
    FROM webhook_endpoints e
    WHERE e.tenant_id = tenant AND e.status = 'enabled' AND (event_type = ANY (e.events) OR '*' = ANY (e.events));
END
$$;
--> statement-breakpoint
CREATE FUNCTION orders_record_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  event_type text;
BEGIN
  IF TG_OP = 'INSERT' THEN
    event_type := 'order.created';
  ELSIF NEW.status IS DISTINCT FROM OLD.status AND NEW.status IN ('paid', 'payment_failed', 'canceled') THEN
    event_type := 'order.' || NEW.status;
  ELSIF OLD.payment_error IS NULL AND NEW.payment_error IS NOT NULL THEN
    -- Refused for good when the payment was asked for: the order stays unpaid until it expires.
    event_type := 'order.payment_failed';
  ELSE
    RETURN NULL;
  END IF;
  PERFORM record_event(NEW.tenant_id, event_type, NEW.id, NEW.id, order_event_object(NEW.id));
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER orders_events AFTER INSERT OR UPDATE ON orders DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION orders_record_event();
--> statement-breakpoint
CREATE FUNCTION refunds_record_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  object jsonb;
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.status IS NOT DISTINCT FROM OLD.status THEN
    RETURN NULL;
  END IF;
  SELECT refund_event_object(r) INTO object FROM refunds r WHERE r.id = NEW.id;
  IF TG_OP = 'INSERT' THEN
    PERFORM record_event(NEW.tenant_id, 'refund.created', NEW.id, NEW.order_id, object);
  END IF;
  IF NEW.status IN ('succeeded', 'failed') THEN
    PERFORM record_event(NEW.tenant_id, 'refund.' || NEW.status, NEW.id, NEW.order_id, object);
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER refunds_events AFTER INSERT OR UPDATE ON refunds DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION refunds_record_event();
--> statement-breakpoint
-- The shop's own changes of a count (set, adjust) and a refund's restock; an order's reservation and
-- its settlement are the order's events.
CREATE FUNCTION stock_movements_record_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.kind IN ('set', 'adjust', 'restock') THEN
    PERFORM record_event(NEW.tenant_id, 'stock.updated', NEW.sku, NEW.order_id,
      (SELECT stock_event_object(s) FROM stock s WHERE s.tenant_id = NEW.tenant_id AND s.sku = NEW.sku));
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER stock_movements_events AFTER INSERT ON stock_movements DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION stock_movements_record_event();
