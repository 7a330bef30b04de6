-- 0008 (PostgreSQL): idempotent retries (issue 24).
--
-- requests keeps the answer of each write that carried a request id, so
-- that its retry returns that answer instead of acting again. The row is
-- written in the same transaction as the write it answers: a write whose
-- commit was lost either left its row (the retry replays it) or nothing
-- (the retry acts). request_key is the SHA-256 (hex) of the principal,
-- the owner and the request id, which scope it; args holds the SHA-256 of
-- each argument, to name the ones a reused id differs in; answer is the
-- store's answer as JSON (a claim's holds its claim token: see package
-- taskgraph, "Request ids"). The server's sweeper removes rows older than
-- the retention (a day), and a principal's oldest beyond its bound.
CREATE TABLE requests (
    request_key   TEXT PRIMARY KEY,
    principal     TEXT NOT NULL,
    op            TEXT NOT NULL,
    args          TEXT NOT NULL,
    answer        TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX requests_by_created ON requests (created_at_ms);
CREATE INDEX requests_by_principal ON requests (principal, created_at_ms);
