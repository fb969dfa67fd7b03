-- LOOK: an ask's hash and the Redis time it was read at, in one step on the ask's own node. A
-- person's act is anchored to that time (bot/engine/acts.py): its write carries a deadline in Redis
-- time, so a write that reaches Redis after the bot gave up on it is refused (resolve.lua, vote.lua).
-- KEYS[1] ask hash. Returns {now_ms, {field, value, ...}}
return {now_ms(), redis.call('HGETALL', KEYS[1])}
