-- STEP_DONE: the step execution is completed (or Slack says it no longer runs): its token is
-- forgotten, its look removed, and the record kept for the retention period (slack-ask status).
-- KEYS[1] step record hash, KEYS[2] step-due zset. ARGV[1] ask_id, ARGV[2] how it ended,
-- ARGV[3] retention_ms
-- Returns 1 the first time, 0 when it was done already.
local now = now_ms()
redis.call('ZREM', KEYS[2], ARGV[1])
local state = redis.call('HGET', KEYS[1], 'state')
if not state or state == 'done' then return 0 end
redis.call('HSET', KEYS[1], 'state', 'done', 'how', ARGV[2], 'done_ms', now)
redis.call('HDEL', KEYS[1], 'token')
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
