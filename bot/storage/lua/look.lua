-- LOOK: an ask's hash and the Redis time it was read at, in one step on the ask's own node. A
-- person's act is anchored to that time (bot/engine/acts.py): its write carries a deadline in Redis
-- time, so a write that reaches Redis after the bot gave up on it is refused (resolve.lua, vote.lua).
-- KEYS[1] ask hash. ARGV[1] '1': a confirmed look (SLACK_ASK_REDIS_MIN_REPLICAS): it also writes
-- the hash's `looked_ms`, so that the WAIT after it covers every write before it in the replication
-- stream (an act's own write that replicas had not confirmed): the bot then tells the person only
-- what a failover cannot take back.
-- Returns {now_ms, {field, value, ...}}
local now = now_ms()
if ARGV[1] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSET', KEYS[1], 'looked_ms', now)
end
return {now, redis.call('HGETALL', KEYS[1])}
