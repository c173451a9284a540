-- The sessions that still let their user in: not expired, user active. One
-- definition for every statement that asks (run sockets, the run lock).
CREATE VIEW live_sessions AS
    SELECT s.token_hash, s.user_id FROM sessions s JOIN users u ON u.id = s.user_id
    WHERE u.active AND s.expires_at > now();
