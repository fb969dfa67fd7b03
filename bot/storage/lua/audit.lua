-- AUDIT: one entry made outside the ask's other scripts (a person's act refused before it reached
-- one: not allowed to answer, say), in the ask's slot. It keeps the list's lifetime (audit_kept): a
-- list it creates takes the ask's remaining life, or the retention when the ask is gone, so an entry
-- never shortens the trail of an ask that lives longer than the retention (no deadline, a long one).
-- KEYS[1] ask hash, KEYS[2] audit list. ARGV[1] event, ARGV[2] by ('' = none), ARGV[3] detail,
-- ARGV[4] retention_ms. Returns 1.
audit_kept(KEYS, now_ms(), ARGV[1], ARGV[2], ARGV[3], nil, nil, tonumber(ARGV[4]))
return 1
