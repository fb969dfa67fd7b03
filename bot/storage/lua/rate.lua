-- RATE: one Slack Web API call from one token bucket shared by every replica (GCRA: the bucket is
-- one number, the "theoretical arrival time" of the next call, so it is one key, in its own slot).
-- A caller either reserves the next slot and waits until it comes, or, when that slot is further
-- off than it may wait, reserves nothing and learns when to ask again.
-- KEYS[1] bucket key (bot.storage.keys.Keys.rate).
-- ARGV[1] interval_ms between calls (60000 / calls per minute),
-- ARGV[2] tolerance_ms: how far ahead of its slot this caller may go (the burst it may use; less
--         for lower priorities, which leaves the rest of the burst to the higher ones),
-- ARGV[3] max_wait_ms: the longest this caller may wait for its slot.
-- Returns {1, wait_ms}: reserved, call after wait_ms; or {0, retry_ms}: nothing reserved.
-- Standalone (no _common.lua): all it needs is Redis time, so every replica agrees on the clock.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = tat - tonumber(ARGV[2]) - now
if wait < 0 then wait = 0 end
local max_wait = tonumber(ARGV[3])
if wait > max_wait then return {0, math.ceil(wait - max_wait)} end
local next_tat = tat + interval
-- The key outlives the last reservation by a little, then goes: an idle bucket is a full one.
redis.call('SET', KEYS[1], string.format('%.3f', next_tat), 'PX', math.ceil(next_tat - now) + 1000)
return {1, math.ceil(wait)}
