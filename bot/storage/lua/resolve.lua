-- RESOLVE: end an ask. Compare-and-set on the ask's state, and the result push onto reply_to in
-- the same atomic step (write_result, shared with vote.lua): exactly one result per ask, whoever races.
-- KEYS[1] ask hash, KEYS[2] audit list, KEYS[3] reply_to list
-- ARGV[1] outcome, ARGV[2] result JSON without its closing: it ends with '"resolved_at":' and
--         write_result inserts the votes, the Redis-time timestamp and '}',
-- ARGV[3] actor id ('' = none), ARGV[4] retention_ms, ARGV[5] refuse_after_deadline ('1'/'0'),
-- ARGV[6] audit event, ARGV[7] audit detail, ARGV[8] expected state ('' = any pending state),
-- ARGV[9] the votes of an ask nobody voted on: 'null' (no approval) or '[]' (approval),
-- ARGV[10] '1' when intake ends the ask without posting it (releases the delivery lease),
-- ARGV[11] a reason the ended messages show, kept in the record for every redraw ('' = none),
-- ARGV[12] lease owner and ARGV[13] lease token when the ending is made under an intake lease
-- ('' = not leased: a person, the sweeper, an agent's cancel), ARGV[14] the replica ending it,
-- ARGV[15] a person's act: the Redis time (ms) after which it is refused ('0' or absent = never);
-- on one server (not Cluster: another slot), KEYS[4] the due zset, ARGV[16] the clean-up delay (ms)
-- and ARGV[17] the ask's member there: the ending that wins sets the clean-up timer in the same
-- atomic step (on Cluster the caller sets it first, in a script of its own); and for a person's
-- ending on one server, KEYS[5..8] the Home keys of home_ended (_common.lua: the ask's own set of
-- people, opened, dirty, the answerer's recent list), ARGV[18] the answerer ('' = none), ARGV[19]
-- the recent list's max, ARGV[20] its ttl_ms, ARGV[21] the delay (ms) before a publish, ARGV[22]
-- '1' when a vote may have put the ask in the answerer's recent list already ('0': no votes, and only
-- this ending puts it there), ARGV[23] '0' when the ask's start indexed nobody (bot.home.indexes_anyone:
-- its own set of people does not exist, and is not read): the won reply then ends with the people
-- whose indexes hold the ask
-- Returns {'won', result, msgs} | {'ended', outcome} | {'late', deadline} | {'missing'} | {'moved', state}
--       | {'stale', holder} (fenced: the lease is no longer the current one; nothing changed)
--       | {'expired', not_after} (a person's act that arrived after the bot gave up on it)
local now = now_ms()
-- One read for the decision, the refusals' audit entries and the won reply (write_result's `tracked`).
local f = redis.call('HMGET', KEYS[1], 'state', 'deadline_ms', 'outcome', 'votes', 'msgs', 'withdrawn', 'log')
local state = f[1]
if not state then return {'missing'} end
local read = {state, f[7]}
local replica = ARGV[14] or ''
local lease = ''
if (ARGV[13] or '') ~= '' then lease = ARGV[12] .. '#' .. ARGV[13] end
local holder = stale_lease(KEYS[1], now, ARGV[12], ARGV[13])
if holder then
  audit(KEYS, now, 'refused_stale', ARGV[3], ARGV[6] .. ' under lease ' .. lease .. ', now ' .. holder,
    replica, lease, nil, read)
  return {'stale', holder}
end
if refused_unconfirmed(KEYS, now, ARGV[15], ARGV[3], ARGV[6], tonumber(ARGV[4]), read) then
  return {'expired', ARGV[15]}
end
-- Intake ends it without posting: no delivery in flight holds back the clean-up (finalize.lua).
if ARGV[10] == '1' then redis.call('HSET', KEYS[1], 'lease_until', 0) end
if state == 'ended' then
  audit(KEYS, now, 'refused_ended', ARGV[3], ARGV[6], replica, lease, nil, read)
  return {'ended', f[3]}
end
if ARGV[8] ~= '' and state ~= ARGV[8] then return {'moved', state} end
local deadline = tonumber(f[2] or '0')
if ARGV[5] == '1' and deadline > 0 and now >= deadline then
  audit(KEYS, now, 'refused_late', ARGV[3], ARGV[6], replica, lease, nil, read)
  return {'late', tostring(deadline)}
end
local out = write_result(KEYS, now, ARGV[1], ARGV[2], votes_json(f[4], ARGV[9] or 'null'), ARGV[3],
  tonumber(ARGV[4]), ARGV[6], ARGV[7], replica, lease, {f[5], f[6], f[7]})
if out[1] == 'won' then
  if (ARGV[11] or '') ~= '' then redis.call('HSET', KEYS[1], 'reason', ARGV[11]) end
  if KEYS[4] then clean_up_timer(KEYS[4], now + tonumber(ARGV[16]), ARGV[17]) end
  if KEYS[5] then
    local homes = {KEYS[5], KEYS[6], KEYS[7], KEYS[8]}
    out[6] = home_ended(homes, now + tonumber(ARGV[21]), ARGV[18], ARGV[17], ARGV[19], ARGV[20],
      ARGV[22] ~= '0', ARGV[23] ~= '0')
  end
end
return out
