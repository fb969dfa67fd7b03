-- VOTE: record one person's vote on an approval ask and decide, in one atomic step in the ask's
-- slot (protocol section 13). Two last votes arriving together therefore decide once, and a vote
-- racing a cancel or a timeout finds the ask ended (or late) and changes nothing.
-- KEYS[1] ask hash, KEYS[2] audit list, KEYS[3] reply_to list
-- ARGV[1] voter id, ARGV[2] voter as result JSON ({"id":...,"name":...}), ARGV[3] option index,
-- ARGV[4] votes needed (approval.count), ARGV[5] '1' when the option is a veto,
-- ARGV[6] the result prefix for "this vote decides" (as resolve.lua's ARGV[2]), ARGV[7] retention_ms,
-- ARGV[8] the replica counting the vote (named in the audit; absent from a previous version),
-- ARGV[9] the Redis time (ms) after which this vote is refused ('0' or absent = never; resolve.lua's ARGV[15])
-- On one server (not Cluster: another slot), KEYS[4] the due zset, ARGV[10] the clean-up delay (ms)
-- and ARGV[11] the ask's member there: the vote that decides sets the clean-up timer in the same
-- atomic step, and an undecided one leaves the ask's timer alone (on Cluster the caller sets it first)
-- Only the option just voted for can reach its count with this vote (a changed vote only takes
-- one away from another option), so the deciding option is always ARGV[3] and its voter ARGV[1].
-- Returns {'won', result, msgs} | {'counted', votes} | {'same', votes} | {'ended', outcome}
--       | {'late', deadline} | {'missing'} | {'expired', not_after}   (votes: the result-form votes JSON)
local now = now_ms()
local f = redis.call('HMGET', KEYS[1], 'state', 'deadline_ms', 'outcome', 'votes', 'msgs', 'withdrawn', 'log')
local state = f[1]
if not state then return {'missing'} end
local read = {state, f[7]}  -- for a refusal's audit entry
if refused_unconfirmed(KEYS, now, ARGV[9], ARGV[1], 'vote for option ' .. ARGV[3], tonumber(ARGV[7]), read) then
  return {'expired', ARGV[9]}
end
local retention = tonumber(ARGV[7])
local option = tonumber(ARGV[3])
local detail = 'option ' .. ARGV[3]
if state == 'ended' then
  audit(KEYS, now, 'refused_ended', ARGV[1], 'vote for ' .. detail, nil, nil, nil, read)
  return {'ended', f[3]}
end
local deadline = tonumber(f[2] or '0')
if deadline > 0 and now >= deadline then
  audit(KEYS, now, 'refused_late', ARGV[1], 'vote for ' .. detail, nil, nil, nil, read)
  return {'late', tostring(deadline)}
end
local votes = {}
if f[4] then votes = cjson.decode(f[4]) end
local kept = {}
local changed = false
for _, v in ipairs(votes) do
  if v.id == ARGV[1] then
    if v.s == option then return {'same', votes_json(f[4], '[]')} end
    changed = true
  else
    table.insert(kept, v)
  end
end
table.insert(kept, {id = ARGV[1], user = ARGV[2], s = option, at = iso(now)})
local stored = cjson.encode(kept)
local n = 0
for _, v in ipairs(kept) do
  if v.s == option then n = n + 1 end
end
local event = 'voted'
if changed then event = 'vote_changed' end
if ARGV[5] == '1' or n >= tonumber(ARGV[4]) then
  local ending = 'approved'
  if ARGV[5] == '1' then ending = 'vetoed' end
  -- The votes, the vote's own entry and write_result's ending entry, all in write_result's one HSET.
  local log = log_append(f[7], audit_entry(now, event, ARGV[1], detail))
  local out = write_result(KEYS, now, 'answered', ARGV[6], votes_json(stored, '[]'), ARGV[1], retention,
    ending, detail .. ' has ' .. n .. ' of ' .. ARGV[4], ARGV[8] or '', '', {f[5], f[6], log, stored})
  if out[1] == 'won' and KEYS[4] then clean_up_timer(KEYS[4], now + tonumber(ARGV[10]), ARGV[11]) end
  return out
end
redis.call('HSET', KEYS[1], 'votes', stored,
  'log', log_append(f[7], audit_entry(now, event, ARGV[1], detail .. ' has ' .. n .. ' of ' .. ARGV[4])))
return {'counted', votes_json(stored, '[]')}
