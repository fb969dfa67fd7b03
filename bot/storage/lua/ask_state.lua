-- An ask's state, and whether its intake lease is live in Redis time (intake's duplicate check: an
-- ask accepted under a live lease is being posted, so its duplicate takes no post token).
-- KEYS[1] the ask's hash. On one server (not Cluster: another slot) also the id index's claim:
-- KEYS[2] the id index, ARGV[1] the ask's tag, ARGV[2] its pending life (ms): SET NX, and only when
-- another envelope holds the index its value is read (store.claim_index_state; one command less
-- than SET and GET side by side).
-- Returns {state or false, 1 when the lease is live else 0, the index's tag (KEYS[2] only)}.
local state, lease_until = unpack(redis.call('HMGET', KEYS[1], 'state', 'lease_until'))
-- TIME only for a lease that is set (a new ask has none, a posted one 0).
local until_ms = tonumber(lease_until) or 0
local live = 0
if until_ms > 0 and until_ms > now_ms() then live = 1 end
if not KEYS[2] then return {state, live} end
local current = ARGV[1]
if not redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', tonumber(ARGV[2])) then
  current = redis.call('GET', KEYS[2])
end
return {state, live, current}
