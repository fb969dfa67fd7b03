-- CANCEL: an agent's cancel, in the ask's slot, in one step: remember it or report the ask.
-- Atomic with accept.lua (same slot), so a cancel can never fall between "the ask is not there yet"
-- and "the ask was just created": either accept.lua finds the tombstone, or this finds the ask.
-- KEYS[1] ask hash, KEYS[2] early-cancel tombstone, KEYS[3] audit list
-- ARGV[1] reason, ARGV[2] retention_ms, ARGV[3] the cancel's reply_to
-- Returns {'remembered'} (no ask yet: the tombstone is set) | {'found', state} (the caller ends a
-- pending ask) | {'foreign', ''} (the ask has another reply_to: the cancel changes nothing)
local state = redis.call('HGET', KEYS[1], 'state')
if not state then
  -- The tombstone is a hash keyed by the cancel's reply_to: accept.lua honours only the one of the
  -- ask's own reply_to (protocol section 8), also when several names share the hash tag.
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[1])
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]))
  return {'remembered'}
end
local rec = cjson.decode(redis.call('HGET', KEYS[1], 'rec'))
if rec.reply_to ~= ARGV[3] then return {'foreign', ''} end
return {'found', state}
