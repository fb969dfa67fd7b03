-- HOME_ENDED: home_changed for an ask resolve.lua may just have ended, in resolve's own round trip
-- (right after it), on one server only: the people's keys are in other slots on Redis Cluster,
-- where home_changed runs after the ending instead (bot/storage/home_index.py).
-- KEYS[1] ask hash, KEYS[2] the ask's own set of indexed people, KEYS[3] opened zset, KEYS[4] dirty
-- zset, KEYS[5] the answerer's "Recently answered by you" list (only when ARGV[1] names them).
-- ARGV[1] the answerer ('' for none), ARGV[2] the ask's member, ARGV[3] recent max, ARGV[4] the
-- list's ttl_ms, ARGV[5] delay_ms before a publish.
-- Returns false when the ask has not ended, else the own set's members ("w:<user>", "r:<user>").
-- Bookkeeping never fails the ending it rides on: its helpers run in pcall (the tab is drawn
-- from the records, and `slack-ask check` repairs an index).
local f = redis.call('HMGET', KEYS[1], 'state', 'by')
if f[1] ~= 'ended' then return false end
local members = redis.call('SMEMBERS', KEYS[2])
local at = now_ms() + tonumber(ARGV[5])
local tabs = {KEYS[3], KEYS[4]}
local seen = {}
local function touch(user)
  if seen[user] then return end
  seen[user] = true
  pcall(home_touch, tabs, at, user)
end
if ARGV[1] ~= '' and f[2] == ARGV[1] then
  -- The ending is this answerer's (resolve wrote them as 'by'): the ask heads their recent list.
  pcall(recent_push, KEYS[5], ARGV[2], ARGV[3], ARGV[4])
  touch(ARGV[1])
end
for _, m in ipairs(members) do touch(string.sub(m, 3)) end
return members
