-- HOME_OPENED: a person opened the bot's Home tab (app_home_opened): remembered (only people who
-- look are published to), and their tab published within delay_ms (debounced: many opens, one publish).
-- KEYS[1] opened zset, KEYS[2] dirty zset. ARGV[1] user, ARGV[2] delay_ms, ARGV[3] keep_ms (how long
-- someone who stops opening it stays remembered).
local now = now_ms()
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
redis.call('ZADD', KEYS[2], 'LT', now + tonumber(ARGV[2]), ARGV[1])
return 1
