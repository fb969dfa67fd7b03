-- An ask's state, and whether its intake lease is live in Redis time (intake's duplicate check: an
-- ask accepted under a live lease is being posted, so its duplicate takes no post token), read only
-- when the id index's claim found it held. On Redis Cluster only, which refuses TIME in a pipeline;
-- one server pipelines HMGET and TIME (store.claim_index_state).
-- KEYS[1] the ask's hash. Returns {state or false, 1 when the lease is live else 0}.
local state, lease_until = unpack(redis.call('HMGET', KEYS[1], 'state', 'lease_until'))
-- TIME only for a lease that is set (a new ask has none, a posted one 0).
local until_ms = tonumber(lease_until) or 0
local live = 0
if until_ms > 0 and until_ms > now_ms() then live = 1 end
return {state, live}
