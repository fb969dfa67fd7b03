-- FINALIZE: mark an ended ask's Slack messages as updated (so the sweeper stops retrying).
-- KEYS[1] ask hash. ARGV[1] message count that was updated.
-- Returns {1} when every known message was updated, {0} when more messages appeared meanwhile,
-- {2, until_ms} while a delivery may still land (the intake lease of an ask cancelled mid-post is
-- live: its message would come after this), {-1} when the ask has not ended.
local f = redis.call('HMGET', KEYS[1], 'state', 'msgs', 'lease_until')
if f[1] ~= 'ended' then return {-1} end
local msgs = cjson.decode(f[2] or '[]')
if #msgs > tonumber(ARGV[1]) then return {0} end
local lease = tonumber(f[3] or '0')
if lease > 0 then
  -- Only an ask cancelled mid-post still has a lease on: TIME only then.
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if lease > now then return {2, tostring(lease)} end
end
redis.call('HSET', KEYS[1], 'finalized', 1)
return {1}
