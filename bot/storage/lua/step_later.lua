-- STEP_LATER: move a claimed execution's next look to ARGV[2], only if its score is still the one
-- the caller's claim set (ARGV[1]): a result taken meanwhile (step_take.lua) holds a claim of its
-- own, which this must not push back.
-- KEYS[1] step-due zset. ARGV[1] the claim's score, ARGV[2] the next look (ms), ARGV[3] ask_id
-- Returns 1 when moved, 0 when left alone.
local score = redis.call('ZSCORE', KEYS[1], ARGV[3])
if not score or tonumber(score) ~= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], tonumber(ARGV[2]), ARGV[3])
return 1
