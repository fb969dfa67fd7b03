-- SCHEDULE_IN: set a timer relative to Redis time (a replica's clock never decides timing).
-- KEYS[1] due zset. ARGV[1] delay_ms, ARGV[2] member. ARGV[3] 'keep_earlier' keeps an earlier timer.
-- Returns the timer's time (the earlier one when it was kept).
local at = now_ms() + tonumber(ARGV[1])
if ARGV[3] == 'keep_earlier' then
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[2])
  if cur and tonumber(cur) <= at then return tonumber(cur) end
end
redis.call('ZADD', KEYS[1], at, ARGV[2])
return at
