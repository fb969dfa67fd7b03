-- WITHDRAW: mark messages of the ask withdrawn before the bot deletes them from Slack (chat.delete),
-- so that neither Slack's event for that delete (dismiss_message) nor a record arriving late
-- (posted.lua: a retried record, a learned stray) takes one for the ask's messages again.
-- KEYS[1] ask hash, KEYS[2] audit list
-- ARGV[1] JSON list of messages ({channel, ts}), ARGV[2] actor, ARGV[3] detail
-- Returns {'ok'}, or {'missing'} when there is no record (nothing can take them for the ask's).
if not redis.call('HGET', KEYS[1], 'state') then return {'missing'} end
withdraw(KEYS[1], cjson.decode(ARGV[1]))
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = 86400000 end
audit(KEYS[2], now_ms(), 'withdrawn', ARGV[2], ARGV[3], ttl)
return {'ok'}
