-- HOME_TOUCH: the App Home of these people is to be published again (bot/storage/home_index.py),
-- for those who opened it at least once; several changes for one person coalesce into one entry.
-- KEYS[1] opened zset, KEYS[2] dirty zset. ARGV[1] delay_ms, ARGV[2..] user ids.
-- ZADD LT: a person already waiting (or claimed, whose score is the claim's end) is brought forward
-- only, never pushed back, so a burst of changes never postpones a publish.
local at = now_ms() + tonumber(ARGV[1])
local marked = 0
for i = 2, #ARGV do
  marked = marked + home_touch(KEYS, at, ARGV[i])
end
return marked
