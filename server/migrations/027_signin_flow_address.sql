-- Sign-ins started and not finished are bounded per client address
-- (signin/service.py FLOWS_PER_ADDRESS): each start writes a row, and a
-- script starting them in a loop must not fill the table.
ALTER TABLE signin_flows ADD COLUMN address text NOT NULL DEFAULT '';
CREATE INDEX signin_flows_address ON signin_flows (address, created_at);
