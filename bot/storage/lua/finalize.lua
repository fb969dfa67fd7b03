-- FINALIZE: mark an ended ask's Slack messages as updated (so the sweeper stops retrying).
-- KEYS[1] ask hash. ARGV[1] message count that was updated.
-- Returns {1} when every known message was updated, {0} when more messages appeared meanwhile,
-- {2, until_ms} while a delivery may still land (the intake lease of an ask cancelled mid-post is
-- live: its message would come after this), {-1} when the ask has not ended.
if redis.call('HGET', KEYS[1], 'state') ~= 'ended' then return {-1} end
local msgs = cjson.decode(redis.call('HGET', KEYS[1], 'msgs') or '[]')
if #msgs > tonumber(ARGV[1]) then return {0} end
local lease = tonumber(redis.call('HGET', KEYS[1], 'lease_until') or '0')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if lease > now then return {2, tostring(lease)} end
redis.call('HSET', KEYS[1], 'finalized', 1)
return {1}
