-- FINALIZE: mark an ended ask's Slack messages as updated (so the sweeper stops retrying).
-- KEYS[1] ask hash. ARGV[1] message count that was updated.
-- Returns 1 when every known message was updated, 0 when more messages appeared meanwhile.
if redis.call('HGET', KEYS[1], 'state') ~= 'ended' then return -1 end
local msgs = cjson.decode(redis.call('HGET', KEYS[1], 'msgs') or '[]')
if #msgs > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'finalized', 1)
return 1
