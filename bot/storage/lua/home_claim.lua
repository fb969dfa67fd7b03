-- HOME_CLAIM: take up to ARGV[1] people whose publish is due, pushed lease_ms ahead (a replica that
-- dies mid-publish only delays theirs by the lease). KEYS[1] dirty zset. ARGV[1] limit, ARGV[2] lease_ms.
-- Returns a flat list: member, claimed score, ...
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local out = {}
local until_ms = now + tonumber(ARGV[2])
for _, member in ipairs(due) do
  redis.call('ZADD', KEYS[1], 'XX', until_ms, member)
  table.insert(out, member)
  table.insert(out, tostring(until_ms))
end
return out
