-- AUDIT: one entry made outside the ask's other scripts (a person's act refused before it reached
-- one: not allowed to answer, say), in the ask's slot: into the ask's log (_common.lua's audit), or,
-- when the ask is gone, onto its audit list for the retention.
-- KEYS[1] ask hash, KEYS[2] audit list. ARGV[1] event, ARGV[2] by ('' = none), ARGV[3] detail,
-- ARGV[4] retention_ms. Returns 1.
audit(KEYS, now_ms(), ARGV[1], ARGV[2], ARGV[3], nil, nil, tonumber(ARGV[4]))
return 1
