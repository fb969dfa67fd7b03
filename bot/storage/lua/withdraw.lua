-- WITHDRAW: mark messages of the ask withdrawn before the bot deletes them from Slack (chat.delete),
-- so that neither Slack's event for that delete (dismiss_message) nor a record arriving late
-- (posted.lua: a retried record, a learned stray) takes one for the ask's messages again.
-- A withdrawn copy is deleted again when the ask's messages are finished (Endings.finish_messages):
-- a chat.delete that failed, or never ran (a crash after this step), leaves no live button behind.
-- So a copy withdrawn from an ended ask makes it unfinished again (`finalized` 0) and sets its
-- clean-up timer, on one server in this same step (KEYS[3], ARGV[4], ARGV[5]; Store._clean_up_timer).
-- KEYS[1] ask hash, KEYS[2] audit list, KEYS[3] the due zset (one server; absent on Cluster)
-- ARGV[1] JSON list of messages ({channel, ts}), ARGV[2] actor, ARGV[3] detail,
-- ARGV[4] the clean-up timer's delay (ms), ARGV[5] due member
-- Returns {'ok', state}, {'missing'} when there is no record (nothing can take them for the ask's), or
-- {'carries'} when nothing changed because the copies are all the ask has in a posted or ended ask:
-- a takeover adopted the copy (learned from Slack's event) after its own delivery was refused as
-- stale, so deleting it would leave the ask with no message and nobody to post one.
local f = redis.call('HMGET', KEYS[1], 'state', 'msgs')
local state = f[1]
if not state then return {'missing'} end
local gone = cjson.decode(ARGV[1])
if state ~= 'accepted' then
  local leaving = {}
  for _, m in ipairs(gone) do leaving[m.channel .. ' ' .. m.ts] = true end
  local kept, taken = 0, 0
  for _, m in ipairs(cjson.decode(f[2] or '[]')) do
    if leaving[m.channel .. ' ' .. m.ts] then taken = taken + 1 else kept = kept + 1 end
  end
  if taken > 0 and kept == 0 then return {'carries'} end
end
withdraw(KEYS[1], gone)
local now = now_ms()
if state == 'ended' then
  redis.call('HSET', KEYS[1], 'finalized', 0)
  if KEYS[3] then clean_up_timer(KEYS[3], now + tonumber(ARGV[4]), ARGV[5]) end
end
audit(KEYS, now, 'withdrawn', ARGV[2], ARGV[3])
return {'ok', state}
