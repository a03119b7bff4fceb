-- A tenant's egress allow-list: the hosts, *.suffix patterns, IP addresses
-- and CIDR blocks its outbound requests (session upstreams, identity
-- providers) may reach besides public addresses. A JSON array of strings;
-- checked by the API before it is written.
ALTER TABLE tenant_policies ADD COLUMN egress_allow TEXT NOT NULL DEFAULT '[]';
