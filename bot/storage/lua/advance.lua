-- ADVANCE: record an escalation step or a reminder that was just posted, compare-and-set on the
-- counter, so two sweepers can never both count the same step.
-- KEYS[1] ask hash, KEYS[2] audit list
-- ARGV[1] counter field ('step' or 'reminders'), ARGV[2] expected value, ARGV[3] JSON list of new
-- messages to record (may be '[]'), ARGV[4] event, ARGV[5] actor, ARGV[6] detail
-- Returns {'ok'} | {'ended'} | {'moved', current} | {'missing'}
local now = now_ms()
local f = redis.call('HMGET', KEYS[1], 'state', ARGV[1], 'msgs')
if not f[1] then return {'missing'} end
-- Every message posted is recorded, whatever the verdict: one posted while the ask ended, or a
-- second copy of a step another sweeper also posted, is redrawn with the others until done.
local new = cjson.decode(ARGV[3])
if #new > 0 then
  local msgs = cjson.decode(f[3])
  for _, m in ipairs(new) do table.insert(msgs, m) end
  redis.call('HSET', KEYS[1], 'msgs', cjson.encode(msgs))
end
if f[1] == 'ended' then
  if #new > 0 then redis.call('HSET', KEYS[1], 'finalized', 0) end
  return {'ended'}
end
if tostring(f[2]) ~= ARGV[2] then return {'moved', tostring(f[2])} end
redis.call('HSET', KEYS[1], ARGV[1], tonumber(ARGV[2]) + 1)
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = 86400000 end
audit(KEYS[2], now, ARGV[4], ARGV[5], ARGV[6], ttl)
return {'ok'}
