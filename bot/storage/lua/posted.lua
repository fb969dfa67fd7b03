-- POSTED: record the Slack messages that now carry the ask.
-- KEYS[1] ask hash, KEYS[2] audit list
-- ARGV[1] consumer (or actor), ARGV[2] JSON list of new messages, ARGV[3] event name,
-- ARGV[4] new escalation step ('' = unchanged), ARGV[5] detail, ARGV[6] '1' for a stray: a message
-- the bot learned of (not the delivery's own), recorded without touching the state or the lease,
-- ARGV[7] lease owner and ARGV[8] lease token of the delivery that posted it ('' = not leased);
-- on one server (not Cluster: other slots), KEYS[3] the due zset and KEYS[4..] the channel sets to
-- track the ask in, ARGV[9] its member there, ARGV[10] the clean-up delay (ms), ARGV[11] the channel
-- sets' lifetime (ms): what is recorded and where the ask is tracked change in one atomic step, so
-- no clean-up timer is needed for a member added ahead of a record that may not land (on Cluster the
-- caller tracks first and sets that timer, store.posted)
-- Returns {'ok', state_before} or {'ended', ''} (the ask ended meanwhile: the caller must turn the
-- new messages into ended messages at once), {'withdrawn', '', state} (every message given was
-- withdrawn: nothing changed), {'missing', ''}, or {'stale', holder, state}: the delivery's lease is
-- no longer the current one (fenced: nothing recorded; the caller withdraws its post). A refusal
-- names the ask's state: an ended one may have left its channels already (store.posted).
local now = now_ms()
-- Where the ask is tracked, once its record has landed (one server only; see above).
local function track()
  for i = 4, #KEYS do
    redis.call('SADD', KEYS[i], ARGV[9])
    redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[11]))
  end
end
-- One read for the record and the lease (stale_lease below).
local f = redis.call('HMGET', KEYS[1], 'state', 'msgs', 'withdrawn', 'owner', 'tries', 'lease_until', 'log')
local state = f[1]
if not state then return {'missing', ''} end
local msgs = cjson.decode(f[2])
-- A message the bot withdrew (withdraw.lua, advance.lua) is never the ask's again, whoever records
-- it: a retried record, or a stray learned from Slack's event just as the bot deleted it.
local withdrawn = withdrawn_set(f[3])
local new = cjson.decode(ARGV[2])
local live = 0
-- Idempotent on (channel, ts): a call retried after a lost reply records each message once.
local known = {}
for _, m in ipairs(msgs) do known[m.channel .. ' ' .. m.ts] = true end
for _, m in ipairs(new) do
  local id = m.channel .. ' ' .. m.ts
  if not withdrawn[id] then
    live = live + 1
    if not known[id] then
      table.insert(msgs, m)
      known[id] = true
    end
  end
end
if #new > 0 and live == 0 then return {'withdrawn', '', state} end
-- Fenced, even when the message is known already: learned as a stray from Slack's event while this
-- delivery was frozen, it may be the ask's second copy now. (A retry of this lease's own record,
-- its reply lost, passes: posted set lease_until 0 and nobody takes over a posted ask.)
local lease = ''
if (ARGV[8] or '') ~= '' then lease = ARGV[7] .. '#' .. ARGV[8] end
local holder = nil
if ARGV[6] ~= '1' then holder = stale_lease(KEYS[1], now, ARGV[7], ARGV[8], {f[4], f[5], f[6]}) end
if holder then
  audit(KEYS, now, 'refused_stale', ARGV[1], ARGV[3] .. ' under lease ' .. lease .. ', now ' .. holder,
    ARGV[1], lease, nil, {state, f[7]})
  return {'stale', holder, state}
end
-- One HSET for every field this record changes. cjson encodes an empty table as {}; msgs is never
-- empty here when ARGV[2] had messages.
local fields = {'msgs', '[]'}
if #msgs > 0 then fields[2] = cjson.encode(msgs) end
local function also(name, value)
  table.insert(fields, name)
  table.insert(fields, value)
end
if ARGV[4] ~= '' then also('step', ARGV[4]) end
if state == 'ended' then
  -- A message that landed after the end (cancelled mid-post) or that the bot only learned of now
  -- (a click on it): recorded, and the ask's messages are not done until it is redrawn too.
  also('finalized', 0)
  also('lease_until', 0)
elseif ARGV[6] ~= '1' and state == 'accepted' then
  -- The post landed: no delivery is in flight any more (finalize.lua waits for none).
  also('state', 'posted')
  also('lease_until', 0)
end
local event = ARGV[3]
if state == 'ended' then event = ARGV[3] .. '_after_end' end
also('log', log_append(f[7], audit_entry(now, event, ARGV[1], ARGV[5], ARGV[1], lease)))
redis.call('HSET', KEYS[1], unpack(fields))
if state == 'ended' then
  if KEYS[3] then
    track()
    redis.call('ZADD', KEYS[3], now + tonumber(ARGV[10]), ARGV[9])  -- its redraw, by a sweep if need be
  end
  return {'ended', ''}
end
if KEYS[3] then track() end
return {'ok', state}
