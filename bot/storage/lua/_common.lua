-- Shared helpers, prepended to every script by bot/scripts.py.
-- Time always comes from the Redis server (TIME), never from a replica's clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- RFC 3339 UTC with milliseconds, from epoch ms (days-from-civil inverse; Lua has no os.date here).
local function iso(ms)
  local s = math.floor(ms / 1000)
  local frac = ms - s * 1000
  local days = math.floor(s / 86400)
  local rem = s - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local y = yoe + era * 400
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp + 3
  if mp >= 10 then m = mp - 9 end
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d,
    math.floor(rem / 3600), math.floor((rem % 3600) / 60), rem % 60, frac)
end

-- AUDIT TRAIL. An ask's trail is the `log` field of its hash: one compact JSON entry a line (cjson
-- escapes a newline inside a string, so a line is an entry), oldest first, the last AUDIT_MAX kept.
-- It lives and dies with the ask, so it has no lifetime of its own to keep, and on the hot path an
-- entry rides on the step's own HMGET and HSET (issue 22: no key, no RPUSH, no PEXPIRE per ask).
-- The audit list (keys[2]) is where the version before wrote every entry; this one writes there only
-- for an ask whose hash is gone (a refusal that comes after it expired). Readers merge the two by
-- time (bot/storage/reads.py).
local AUDIT_MAX = 200  -- bot.storage.keys.AUDIT_MAX
local AUDIT_MIN_BYTES = 32  -- no entry is shorter ('{"at":<13 digits>,"event":""}' is 31)

-- One entry. `replica` (optional): the replica that made the change and `lease` the lease it held
-- ('' when the work was not leased). Empty fields are left out (readers take a missing one as
-- empty, this version and the ones before), and so is `replica` when the lease is its own
-- ('<replica>#<token>', which names it: read_audit takes it from there).
local function audit_entry(at, event, by, detail, replica, lease)
  local entry = {at = at, event = event}
  if by and by ~= '' then entry.by = by end
  if detail and detail ~= '' then entry.detail = detail end
  if lease and lease ~= '' then entry.lease = lease end
  if replica and replica ~= '' and not (lease and string.match(lease, '^(.*)#%d+$') == replica) then
    entry.replica = replica
  end
  return cjson.encode(entry)
end

-- The log `log` (nil: none yet) with `entry` appended, the oldest entries dropped over the cap.
-- Lines are counted only when the log is long enough to hold more than the cap.
local function log_append(log, entry)
  if not log or log == '' then return entry end
  log = log .. '\n' .. entry
  if #log > AUDIT_MAX * AUDIT_MIN_BYTES then
    local _, breaks = string.gsub(log, '\n', '\n')
    for _ = AUDIT_MAX, breaks do log = string.sub(log, string.find(log, '\n', 1, true) + 1) end
  end
  return log
end

-- One entry for the ask of keys {ask hash, audit list}, in a step of its own: into the hash's log
-- (HMGET, HSET), or, when the hash is gone, onto the audit list, which then lives `ttl` ms (a day
-- unless given) from now. `read` (optional): the hash's {state, log}, when the caller has read them
-- already in this step (then only the HSET).
local function audit(keys, at, event, by, detail, replica, lease, ttl, read)
  local entry = audit_entry(at, event, by, detail, replica, lease)
  local f = read or redis.call('HMGET', keys[1], 'state', 'log')
  if f[1] then
    redis.call('HSET', keys[1], 'log', log_append(f[2], entry))
    return
  end
  if redis.call('RPUSH', keys[2], entry) > AUDIT_MAX then redis.call('LTRIM', keys[2], -AUDIT_MAX, -1) end
  redis.call('PEXPIRE', keys[2], ttl or 86400000)
end

-- FENCING. Work done under an intake lease carries that lease: its owner and its token, the ask's
-- `tries` when accept.lua granted it (every grant, takeover or first accept, old version or new,
-- moves `tries` on, so it is an epoch). A change made under a lease lands only while that lease is
-- the current one: same owner, same token, and not run out (lease_until 0 means its delivery is
-- over and nobody took the ask over since: still this lease's). An empty token: work that is not
-- leased (a person's act, a message learned of), or a replica from before fencing (rolling update).
-- Returns nil when the change may land, else who holds the ask now ('owner#tries', or 'expired').
-- `held` (optional): the hash's {owner, tries, lease_until}, when the caller has read them already.
local function stale_lease(key, now, owner, token, held)
  if token == nil or token == '' then return nil end
  local f = held or redis.call('HMGET', key, 'owner', 'tries', 'lease_until')
  if f[1] ~= owner or tostring(f[2]) ~= token then
    return tostring(f[1] or '') .. '#' .. tostring(f[2] or '')
  end
  local until_ms = tonumber(f[3] or '0') or 0
  if until_ms > 0 and until_ms <= now then return 'expired' end
  return nil
end

-- A person's act that reaches Redis after `not_after` (Redis ms; '0' or nil: no limit) changes
-- nothing: by then the bot has given up waiting for it, and tells that person whether it counted
-- only from a look made after that time (bot/engine/acts.py). Audited (for as long as the ask
-- lives); true when refused.
local function refused_unconfirmed(keys, now, not_after, by, detail, retention, read)
  local limit = tonumber(not_after or '0') or 0
  if limit <= 0 or now <= limit then return false end
  audit(keys, now, 'refused_unconfirmed', by, detail, nil, nil, retention, read)
  return true
end

-- The ask's votes as the result's `votes` field (protocol section 13): the final vote of each
-- person in the order cast. `stored` is the hash's 'votes' field (nil before the first vote);
-- `none` is what an ask without one gives ('null' for asks without approval, '[]' for approvals).
-- Built by hand, not by cjson, so that keys keep the protocol's order and an empty list is [].
local function votes_json(stored, none)
  if not stored then return none end
  local parts = {}
  for _, v in ipairs(cjson.decode(stored)) do
    table.insert(parts, '{"user":' .. v.user .. ',"selected":[' .. string.format('%d', v.s) ..
      '],"at":"' .. v.at .. '"}')
  end
  return '[' .. table.concat(parts, ',') .. ']'
end

-- End a pending ask: state, stored result, the one push onto reply_to and the audit entry, in the
-- caller's atomic step. The only place a result is written (resolve.lua and vote.lua call it).
-- `prefix` is the result JSON up to and including '"resolved_at":' (bot.results.result_prefix);
-- `votes` is inserted just before resolved_at, and the Redis time closes the object.
-- keys: {ask hash, audit list, reply_to}. `tracked`: the hash's {msgs, withdrawn, log} as the caller
-- read them in this step (log with the caller's own entries appended), and a 4th (optional): the
-- ask's new `votes`, written in the same HSET (vote.lua's deciding vote).
-- Returns {'won', result, msgs, undelivered, withdrawn} (withdrawn: the hash's field, '' when none;
-- the channels to leave at finalize): undelivered is '' or why nothing was pushed (reply_to became
-- a key of another type meanwhile: the bot only appends to a list or a missing key, and then changes
-- nothing about that key; protocol section 1). The push comes first and in pcall, so such a key
-- fails it without a TYPE to ask first and before anything else is written.
local RESOLVED_AT = '"resolved_at":'
local function write_result(keys, now, outcome, prefix, votes, actor, retention, event, detail, replica, lease,
                            tracked)
  if string.sub(prefix, -#RESOLVED_AT) ~= RESOLVED_AT then
    return redis.error_reply('result prefix must end with ' .. RESOLVED_AT)
  end
  local head = string.sub(prefix, 1, #prefix - #RESOLVED_AT)
  local result = head .. '"votes":' .. votes .. ',' .. RESOLVED_AT .. '"' .. iso(now) .. '"}'
  local log = log_append(tracked[3], audit_entry(now, event, actor, detail, replica, lease))
  local fields = {'state', 'ended', 'outcome', outcome, 'result', result, 'by', actor, 'resolved_ms', now,
    'finalized', 0}
  local undelivered = ''
  local pushed = redis.pcall('RPUSH', keys[3], result)
  if type(pushed) == 'table' and pushed.err then
    -- Only a key of another type is the agent's to fix; any other refusal (out of memory, a read-only
    -- replica) fails the step as redis.call would, with nothing written. (tostring: fakeredis's Lua
    -- gives the message as userdata.)
    local err = tostring(pushed.err)
    if not string.find(err, 'WRONGTYPE', 1, true) then return redis.error_reply(err) end
    local kind = redis.call('TYPE', keys[3]).ok
    undelivered = 'reply_to ' .. keys[3] .. ' is a ' .. kind .. ', not a list: nothing was pushed'
    table.insert(fields, 'undelivered'); table.insert(fields, undelivered)
    log = log_append(log, audit_entry(now, 'not_pushed', '', undelivered))
  else
    redis.call('PEXPIRE', keys[3], retention)
  end
  table.insert(fields, 'log'); table.insert(fields, log)
  if tracked[4] then table.insert(fields, 'votes'); table.insert(fields, tracked[4]) end
  redis.call('HSET', keys[1], unpack(fields))
  redis.call('PEXPIRE', keys[1], retention)
  return {'won', result, tracked[1], undelivered, tracked[2] or ''}
end

-- Withdrawn messages: copies of the ask the bot deletes from Slack itself (a sweeper's losing
-- escalation copy, a post whose record Redis kept away). The ask hash's 'withdrawn' field lists
-- them as "<channel> <ts>"; a withdrawn message is never one of the ask's messages again (posted.lua
-- and advance.lua skip it), so the event Slack sends for the bot's own chat.delete dismisses nothing.
-- `raw` is that field (nil when nothing was withdrawn); returns the set of its ids.
local function withdrawn_set(raw)
  local set = {}
  if raw then
    for _, id in ipairs(cjson.decode(raw)) do set[id] = true end
  end
  return set
end

-- Mark the messages `gone` (a list of {channel, ts}) withdrawn in the ask hash `key` and take them
-- out of its messages, in the caller's atomic step. The bot deletes them from Slack only after this
-- step has run (bot.engine.room.Room.withdraw).
local function withdraw(key, gone)
  local f = redis.call('HMGET', key, 'msgs', 'withdrawn')
  local ids = {}
  if f[2] then ids = cjson.decode(f[2]) end
  local set = withdrawn_set(f[2])
  for _, m in ipairs(gone) do
    local id = m.channel .. ' ' .. m.ts
    if not set[id] then
      table.insert(ids, id)
      set[id] = true
    end
  end
  local kept = {}
  for _, m in ipairs(cjson.decode(f[1] or '[]')) do
    if not set[m.channel .. ' ' .. m.ts] then table.insert(kept, m) end
  end
  -- cjson encodes an empty table as {}; ids is never empty here when `gone` was not.
  local msgs = '[]'
  if #kept > 0 then msgs = cjson.encode(kept) end
  redis.call('HSET', key, 'msgs', msgs, 'withdrawn', cjson.encode(ids))
end

-- Mark an ended ask's messages done once ``updated`` of them were redrawn (finalize.lua, finish.lua):
-- {1} done, {0} more messages appeared meanwhile, {2, until_ms} a delivery may still land (the intake
-- lease of an ask cancelled mid-post is live: its message would come after this), {-1} not ended.
local function finalize_messages(key, updated)
  local f = redis.call('HMGET', key, 'state', 'msgs', 'lease_until')
  if f[1] ~= 'ended' then return {-1} end
  local msgs = cjson.decode(f[2] or '[]')
  if #msgs > tonumber(updated) then return {0} end
  local lease = tonumber(f[3] or '0')
  if lease > 0 then
    -- Only an ask cancelled mid-post still has a lease on: TIME only then.
    local now = now_ms()
    if lease > now then return {2, tostring(lease)} end
  end
  redis.call('HSET', key, 'finalized', 1)
  return {1}
end

-- The clean-up timer of the ask an ending script just ended (resolve.lua, vote.lua): at `at` (Redis
-- time, ms) for `member` of the due zset `key`, unless the ask has an earlier one (LT: one command).
local function clean_up_timer(key, at, member)
  redis.call('ZADD', key, 'LT', at, member)
end

-- "Recently answered by you": `member` to the front of the person's list `key`, once, keeping the
-- last `max` (home_recent.lua, resolve.lua). `listed`: false when the caller knows the list cannot
-- hold it yet (the one ending of an ask without votes), which spares the LREM's scan.
local function recent_push(key, member, max, ttl_ms, listed)
  if listed ~= false then redis.call('LREM', key, 0, member) end
  -- LPUSH gives the new length: a list not past `max` has nothing to trim.
  if redis.call('LPUSH', key, member) > tonumber(max) then redis.call('LTRIM', key, 0, tonumber(max) - 1) end
  redis.call('PEXPIRE', key, tonumber(ttl_ms))
end

-- The App Home of `user` is to be published at `at`, if they opened it at least once (keys[1],
-- the opened zset); ZADD LT into keys[2], the dirty zset: brought forward only, never pushed back
-- (home_touch.lua, resolve.lua). Returns 1 when marked.
local function home_touch(keys, at, user)
  if not redis.call('ZSCORE', keys[1], user) then return 0 end
  redis.call('ZADD', keys[2], 'LT', at, user)
  return 1
end

-- The Home tabs' bookkeeping of an ask resolve.lua just ended, in its own atomic step, on one server
-- only (the people's keys are in other slots on Redis Cluster, where home_changed runs after the
-- ending instead, bot/storage/home_index.py). keys: the ask's own set of indexed people, the opened
-- zset, the dirty zset, the answerer's "Recently answered by you" list (nil without an answerer).
-- The answerer (resolve wrote them as `by`) gets the ask at the head of their recent list; every tab
-- showing it is marked to publish at `at` (`listed`: whether a vote may have put it in the recent
-- list already; `indexed`: false when the ask's start indexed nobody, so that its own set does not
-- exist). Returns the own set's members ("w:<user>", "r:<user>").
-- Bookkeeping never fails the ending it rides on: its helpers run in pcall (the tab is drawn from
-- the records, and `slack-ask check` repairs an index).
local function home_ended(keys, at, answerer, member, max, ttl_ms, listed, indexed)
  local members = {}
  if indexed ~= false then members = redis.call('SMEMBERS', keys[1]) end
  local tabs = {keys[2], keys[3]}
  local seen = {}
  local function touch(user)
    if seen[user] then return end
    seen[user] = true
    pcall(home_touch, tabs, at, user)
  end
  if answerer ~= '' and keys[4] then
    pcall(recent_push, keys[4], member, max, ttl_ms, listed)
    touch(answerer)
  end
  for _, m in ipairs(members) do touch(string.sub(m, 3)) end
  return members
end
