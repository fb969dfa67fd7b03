-- CLAIM_DUE: hand due timers to one sweeper. Claimed members are pushed forward by a lease, so a
-- sweeper that dies mid-sweep loses nothing: its members come due again when the lease ends.
-- KEYS[1] due zset. ARGV[1] max members, ARGV[2] lease_ms.
-- Returns {now, member1, member2, ...}. Cost: O(log N + claimed), whatever N is.
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local out = {tostring(now)}
local until_ms = now + tonumber(ARGV[2])
for _, member in ipairs(due) do
  redis.call('ZADD', KEYS[1], until_ms, member)
  table.insert(out, member)
end
return out
