-- STEP_BEGIN: record one execution of the Workflow Builder step, once (Slack may deliver
-- function_executed again). The first look is scheduled in the same step, so a replica that dies
-- right after this call still gets the ask sent (or the error told) by a sweep.
-- KEYS[1] step record hash, KEYS[2] step-due zset
-- ARGV[1] ask_id, ARGV[2] function_execution_id, ARGV[3] just-in-time token, ARGV[4] envelope JSON
-- ('' when refused), ARGV[5] refusal message ('' when the inputs are good), ARGV[6] first look in ms,
-- ARGV[7] the record's TTL in ms
-- Returns {'new', now} | {'dup', state}
local now = now_ms()
local state = redis.call('HGET', KEYS[1], 'state')
if state then return {'dup', state} end
redis.call('HSET', KEYS[1], 'state', 'pending', 'exec', ARGV[2], 'token', ARGV[3], 'token_ms', now,
  'env', ARGV[4], 'fail', ARGV[5])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[7]))
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[6]), ARGV[1])
return {'new', tostring(now)}
