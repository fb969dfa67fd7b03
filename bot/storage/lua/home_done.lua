-- HOME_DONE: a claimed publish is done; the entry goes unless a change came meanwhile (its score moved:
-- home_touch brought it forward), which then publishes again. KEYS[1] dirty. ARGV[1] member, ARGV[2] score.
local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
if cur and tonumber(cur) == tonumber(ARGV[2]) then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
return 0
