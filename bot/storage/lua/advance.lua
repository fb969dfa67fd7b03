-- ADVANCE: record an escalation step or a reminder that was just posted, compare-and-set on the
-- counter, so two sweepers can never both count the same step.
-- KEYS[1] ask hash, KEYS[2] audit list
-- ARGV[1] counter field ('step' or 'reminders'), ARGV[2] expected value, ARGV[3] JSON list of new
-- messages to record (may be '[]'), ARGV[4] event, ARGV[5] actor, ARGV[6] detail
-- Returns {'ok'} | {'ended'} | {'moved', current} | {'missing'}
local now = now_ms()
local f = redis.call('HMGET', KEYS[1], 'state', ARGV[1], 'msgs', 'withdrawn', 'log')
if not f[1] then return {'missing'} end
local new = cjson.decode(ARGV[3])
local counted = tostring(f[2] or '0')  -- a counter never written reads as 0 (accept.lua)
if f[1] ~= 'ended' and counted ~= ARGV[2] then
  -- Another sweeper posted this step first: the copy posted here is withdrawn in this same step
  -- (never a live member of the record), and only then deleted by the caller, so Slack's event for
  -- that delete finds no message of the ask to dismiss it with.
  if #new > 0 then
    withdraw(KEYS[1], new)
    audit(KEYS, now, 'withdrawn', ARGV[5], 'a copy of step ' .. (tonumber(ARGV[2]) + 1) ..
      ' another sweeper posted first', nil, nil, nil, {f[1], f[5]})
  end
  return {'moved', counted}
end
-- Every other message posted is recorded: one posted while the ask ended is redrawn with the
-- others until done. Idempotent on (channel, ts); a withdrawn message is never recorded again.
if #new > 0 then
  local msgs = cjson.decode(f[3])
  local skip = withdrawn_set(f[4])
  for _, m in ipairs(msgs) do skip[m.channel .. ' ' .. m.ts] = true end
  for _, m in ipairs(new) do
    if not skip[m.channel .. ' ' .. m.ts] then table.insert(msgs, m) end
  end
  if #msgs > 0 then redis.call('HSET', KEYS[1], 'msgs', cjson.encode(msgs)) end
end
if f[1] == 'ended' then
  if #new > 0 then redis.call('HSET', KEYS[1], 'finalized', 0) end
  return {'ended'}
end
redis.call('HSET', KEYS[1], ARGV[1], tonumber(ARGV[2]) + 1,
  'log', log_append(f[5], audit_entry(now, ARGV[4], ARGV[5], ARGV[6])))
return {'ok'}
