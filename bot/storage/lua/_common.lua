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

-- Append one audit entry; the list is capped and lives as long as the ask.
local function audit(key, at, event, by, detail, ttl)
  redis.call('RPUSH', key, cjson.encode({at = at, event = event, by = by, detail = detail}))
  redis.call('LTRIM', key, -200, -1)  -- bot.keys.AUDIT_MAX
  redis.call('PEXPIRE', key, ttl)
end

-- A person's act that reaches Redis after `not_after` (Redis ms; '0' or nil: no limit) changes
-- nothing: by then the bot has given up waiting for it, and tells that person whether it counted
-- only from a look made after that time (bot/engine/acts.py). Audited (for as long as the ask
-- lives); true when refused.
local function refused_unconfirmed(keys, now, not_after, by, detail, retention)
  local limit = tonumber(not_after or '0') or 0
  if limit <= 0 or now <= limit then return false end
  local ttl = redis.call('PTTL', keys[1])
  if ttl < 0 then ttl = retention end
  audit(keys[2], now, 'refused_unconfirmed', by, detail, ttl)
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
-- keys: {ask hash, audit list, reply_to}. Returns {'won', result, msgs, undelivered}: undelivered is
-- '' or why nothing was pushed (reply_to became a key of another type meanwhile: the bot only
-- appends to a list or a missing key, and then changes nothing about that key; protocol section 1).
local RESOLVED_AT = '"resolved_at":'
local function write_result(keys, now, outcome, prefix, votes, actor, retention, event, detail)
  if string.sub(prefix, -#RESOLVED_AT) ~= RESOLVED_AT then
    return redis.error_reply('result prefix must end with ' .. RESOLVED_AT)
  end
  local head = string.sub(prefix, 1, #prefix - #RESOLVED_AT)
  local result = head .. '"votes":' .. votes .. ',' .. RESOLVED_AT .. '"' .. iso(now) .. '"}'
  redis.call('HSET', keys[1], 'state', 'ended', 'outcome', outcome, 'result', result,
    'by', actor, 'resolved_ms', now, 'finalized', 0)
  redis.call('PEXPIRE', keys[1], retention)
  local undelivered = ''
  local kind = redis.call('TYPE', keys[3]).ok
  if kind == 'list' or kind == 'none' then
    redis.call('RPUSH', keys[3], result)
    redis.call('PEXPIRE', keys[3], retention)
  else
    undelivered = 'reply_to ' .. keys[3] .. ' is a ' .. kind .. ', not a list: nothing was pushed'
    redis.call('HSET', keys[1], 'undelivered', undelivered)
  end
  audit(keys[2], now, event, actor, detail, retention)
  if undelivered ~= '' then audit(keys[2], now, 'not_pushed', '', undelivered, retention) end
  return {'won', result, redis.call('HGET', keys[1], 'msgs'), undelivered}
end
