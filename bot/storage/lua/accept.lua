-- ACCEPT: take an ask from the intake stream (idempotent on ask_id; first taker holds a lease).
-- KEYS[1] ask hash, KEYS[2] audit list, KEYS[3] early-cancel tombstone (hash: reply_to -> reason),
-- KEYS[4] reply_to
-- ARGV[1] record JSON, ARGV[2] deadline_ms (0 = none), ARGV[3] consumer, ARGV[4] lease_ms,
-- ARGV[5] pending ttl_ms (lifetime before the ask ends), ARGV[6] entry id, ARGV[7] retention_ms,
-- ARGV[8] '1' when the ask has escalation steps or reminders to count ('0': it has neither)
-- Not in the hash (each field costs a pending ask about 50 bytes, issue 22): created_ms (in `rec`;
-- nothing read the hash's copy), `finalized` until the ask ends (missing reads as not finalized,
-- in this version and the one before), and the `step` and `reminders` counters of an ask that has
-- nothing to count (missing reads as 0; only advance.lua compares them, and no version runs it for
-- an ask without escalation steps or reminders).
-- Returns {verdict, detail, entry, token}: token is the lease granted (its `tries`, the fencing
-- token every change made under it carries; _common.lua's stale_lease) for post, cancel, expired:
--   {'post', tries}      this consumer holds the lease and must post to Slack
--   {'busy', ms}         another consumer (or, for a duplicate entry, anyone) holds a live lease for
--                        ms more: leave the entry pending
--   {'posted', why}      already posted: just ack ('adopted': a takeover found a live copy an
--                        earlier delivery posted in the record, and made it the ask's post)
--   {'ended', result, entry} already ended: the stored result (empty for an entry added before the
--                        end) and the entry that carried the ask
--   {'cancel', reason}   a cancel from the ask's reply_to arrived first: end it as cancelled now
--   {'expired', why}     read (first, or in a takeover) after its deadline: end it by its timeout
--                        policy now, never post it (deadlines win over a late delivery)
--   {'refused', type}    reply_to is a key of another type: nothing pushed, nothing about that key
--                        changed; the record (ended, no result) says why
local now = now_ms()
local state = redis.call('HGET', KEYS[1], 'state')
if state then
  if state == 'ended' then
    local r = redis.call('HMGET', KEYS[1], 'result', 'entry', 'resolved_ms')
    -- An entry added while the ask was still pending (an agent's retry) is a duplicate, ignored
    -- (section 10.1): only a re-send after the end gets the stored result once more. Entry ids
    -- start with the Redis time of their XADD.
    local sent = tonumber(string.match(ARGV[6], '^(%d+)') or '')
    if sent and r[3] and sent <= tonumber(r[3]) then return {'ended', '', r[2] or ''} end
    return {'ended', r[1] or '', r[2] or ''}
  end
  if state == 'posted' then return {'posted', ''} end
  local lease = tonumber(redis.call('HGET', KEYS[1], 'lease_until') or '0')
  if redis.call('HGET', KEYS[1], 'entry') ~= ARGV[6] then
    -- Another entry with the same ask_id (an agent's retry) before the ask is posted. It is not
    -- acknowledged yet: a Redis failover can lose the first entry while the record survives (the
    -- two were written through different connections), and then this one is all that is left to
    -- deliver it. While a lease is live it waits; after that it takes the delivery over (and the
    -- first, should it still be pending, then waits, or finds the ask posted and is acknowledged).
    if lease > now then return {'busy', tostring(lease - now)} end
    redis.call('HSET', KEYS[1], 'entry', ARGV[6])
  end
  -- A live lease means another replica may still be delivering it. The owner itself only gets here
  -- when it is not (intake never hands one entry to two of its tasks, and a restarted replica with
  -- a stable consumer name has nothing in flight): it takes the ask over at once.
  if lease > now and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[3] then
    return {'busy', tostring(lease - now)}
  end
  local dl = tonumber(redis.call('HGET', KEYS[1], 'deadline_ms') or '0') or 0
  local known = redis.call('HGET', KEYS[1], 'msgs')
  if known and known ~= '[]' and not (dl > 0 and now >= dl) then
    -- A copy an earlier delivery posted is live and in the record (learned from Slack's event: its
    -- replica froze or died before it read Slack's answer): that copy is the ask's post, and it is
    -- not made again. The earlier lease stays the current one (so its late record still lands).
    redis.call('HSET', KEYS[1], 'state', 'posted', 'lease_until', 0)
    audit(KEYS, now, 'adopted', ARGV[3], 'the copy an earlier delivery posted carries the ask', ARGV[3], '')
    return {'posted', 'adopted'}
  end
  local tries = redis.call('HINCRBY', KEYS[1], 'tries', 1)
  redis.call('HSET', KEYS[1], 'owner', ARGV[3], 'lease_until', now + tonumber(ARGV[4]))
  -- The agent's cancel that came first stays the verdict for every holder: the one before may
  -- have frozen or died before its ending landed (then refused as stale), and that cancel is the
  -- agent's, not a decision of the replica's that fencing may drop.
  local cancelled = redis.call('HGET', KEYS[3], KEYS[4])
  if cancelled then
    redis.call('HSET', KEYS[1], 'lease_until', 0)
    audit(KEYS, now, 'taken_over', ARGV[3], 'delivery attempt ' .. tries .. ', cancelled first', ARGV[3],
      ARGV[3] .. '#' .. tries)
    return {'cancel', cancelled, '', tostring(tries)}
  end
  local deadline = tonumber(redis.call('HGET', KEYS[1], 'deadline_ms') or '0') or 0
  if deadline > 0 and now >= deadline then
    -- The holder before froze or died past the deadline: the ask times out under this new lease
    -- (which fences the old holder out), it is not posted late.
    audit(KEYS, now, 'taken_over', ARGV[3], 'delivery attempt ' .. tries .. ', past its deadline', ARGV[3],
      ARGV[3] .. '#' .. tries)
    return {'expired', 'taken over after its deadline', '', tostring(tries)}
  end
  audit(KEYS, now, 'taken_over', ARGV[3], 'delivery attempt ' .. tries, ARGV[3], ARGV[3] .. '#' .. tries)
  return {'post', tostring(tries), '', tostring(tries)}
end
-- The bot only ever appends to a list or a missing key (protocol section 1).
local kind = redis.call('TYPE', KEYS[4]).ok
if kind ~= 'list' and kind ~= 'none' then
  local why = 'reply_to ' .. KEYS[4] .. ' is a ' .. kind .. ', not a list: nothing was pushed'
  local retention = tonumber(ARGV[7])
  redis.call('HSET', KEYS[1], 'rec', ARGV[1], 'state', 'ended', 'outcome', 'error', 'deadline_ms', ARGV[2],
    'msgs', '[]', 'entry', ARGV[6], 'finalized', 1,
    'resolved_ms', now, 'undelivered', why, 'log', audit_entry(now, 'refused_reply_to', ARGV[3], why))
  redis.call('PEXPIRE', KEYS[1], retention)
  return {'refused', kind}
end
local ttl = tonumber(ARGV[5])
local fields = {'rec', ARGV[1], 'state', 'accepted', 'deadline_ms', ARGV[2], 'owner', ARGV[3],
  'lease_until', now + tonumber(ARGV[4]), 'tries', 1, 'msgs', '[]', 'entry', ARGV[6],
  'log', audit_entry(now, 'accepted', ARGV[3], '', ARGV[3], ARGV[3] .. '#1')}
if ARGV[8] ~= '0' then
  table.insert(fields, 'step'); table.insert(fields, 0)
  table.insert(fields, 'reminders'); table.insert(fields, 0)
end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('PEXPIRE', KEYS[1], ttl)
-- Only a cancel from the ask's own reply_to counts (cancel.lua keys the tombstone by it).
local reason = redis.call('HGET', KEYS[3], KEYS[4])
-- Ending at once (cancelled first, or read after its deadline): nothing will be posted, so no
-- delivery lease holds back the clean-up (finalize.lua).
if reason then
  -- The tombstone is kept (it expires, set before the record, before the record does): should this
  -- holder's ending be refused as stale, a takeover above reads the same cancel again.
  redis.call('HSET', KEYS[1], 'lease_until', 0)
  return {'cancel', reason, '', '1'}
end
local deadline = tonumber(ARGV[2])
if deadline > 0 and now >= deadline then
  redis.call('HSET', KEYS[1], 'lease_until', 0)
  return {'expired', 'read after its deadline', '', '1'}
end
return {'post', '1', '', '1'}
