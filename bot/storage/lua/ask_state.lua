-- An ask's state, and whether its intake lease is live in Redis time (intake's duplicate check: an
-- ask accepted under a live lease is being posted, so its duplicate takes no post token).
-- KEYS[1] the ask's hash. Returns {state or false, 1 when the lease is live else 0}.
local state, lease_until = unpack(redis.call('HMGET', KEYS[1], 'state', 'lease_until'))
local live = (tonumber(lease_until) or 0) > now_ms() and 1 or 0
return {state, live}
