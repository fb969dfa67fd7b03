-- FINISH: finalize.lua and what follows it, at once, where every key is on one server (not Cluster):
-- the messages marked done, the ask out of the channel sets and the Home indexes it was in, and its
-- clean-up timer removed once done. Atomic, so no record landing after the end can come in between
-- (store.posted sets its timer again after resetting ``finalized``; it finds this done or not begun).
-- KEYS[1] ask hash, KEYS[2] the timers (P:due), KEYS[3 .. 2+ARGV[3]] channel sets (SREM), the rest
-- people's Home indexes (ZREM). ARGV[1] message count that was updated, ARGV[2] the ask's member
-- ("<ask_id> <tag>") in all of them, ARGV[3] how many channel sets.
-- Returns finalize_messages' answer (_common.lua): {1} done, {0}, {2, until_ms} or {-1}.
local done = finalize_messages(KEYS[1], ARGV[1])
if done[1] == -1 then return done end  -- not ended: it stays in its channels and indexes
local sets = tonumber(ARGV[3])
for i = 3, #KEYS do
  if i <= 2 + sets then
    redis.call('SREM', KEYS[i], ARGV[2])
  else
    redis.call('ZREM', KEYS[i], ARGV[2])
  end
end
if done[1] == 1 then redis.call('ZREM', KEYS[2], ARGV[2]) end
return done
