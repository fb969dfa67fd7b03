-- PUSH: append a result to reply_to outside resolve (a stored result re-sent, or the error of an
-- envelope whose ask_id could not be read). Only onto a list or a missing key (protocol section 1):
-- the TYPE check and the push are one atomic step, and the TTL is set only when the push happened.
-- KEYS[1] reply_to. ARGV[1] result JSON, ARGV[2] retention_ms.
-- Returns {'ok'} or {'wrongtype', type}.
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'list' and kind ~= 'none' then return {'wrongtype', kind} end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return {'ok'}
