-- SCHEDULE_IN: set a timer relative to Redis time (a replica's clock never decides timing).
-- KEYS[1] due zset. ARGV[1] delay_ms, ARGV[2] member. ARGV[3] 'keep_earlier' keeps an earlier timer.
local at = now_ms() + tonumber(ARGV[1])
if ARGV[3] == 'keep_earlier' then return schedule_keep_earlier(KEYS[1], at, ARGV[2]) end
redis.call('ZADD', KEYS[1], at, ARGV[2])
return at
