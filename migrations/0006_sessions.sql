-- 0006_sessions.sql — browser sessions of the portal (service/session.c).
--
-- POST /v1/session exchanges an API key for a session: the browser keeps a random token in
-- an HttpOnly cookie; the database keeps only the token's SHA-256, the key it came from and
-- when it ends. A session is worth what its key is worth: it is refused once the key is
-- revoked (the lookup joins api_keys), and goes with the key when the key is deleted.

CREATE TABLE sessions (
    token_hash       bytea PRIMARY KEY CHECK (length(token_hash) = 32),   -- SHA-256 of the cookie's token
    key_id           uuid NOT NULL REFERENCES api_keys(id) ON DELETE CASCADE,
    created_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,                                -- absolute end (--session-hours)
    idle_expires_at  timestamptz NOT NULL,                                -- moved on by each use (--session-idle-minutes)
    CHECK (idle_expires_at <= expires_at)
);
CREATE INDEX sessions_key ON sessions (key_id);
CREATE INDEX sessions_expires ON sessions (expires_at);
