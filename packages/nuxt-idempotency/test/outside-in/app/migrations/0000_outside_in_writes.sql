-- No unique index on key on purpose: the test counts how often each key's write committed.
CREATE TABLE outside_in_writes (
  id bigserial PRIMARY KEY,
  key text NOT NULL,
  note text NOT NULL
);
