-- STEP_TAKE: take results off the step's reply list and claim each one's execution in the same
-- atomic step: a replica that dies after this has left the execution due again after the lease (the
-- sweep then completes it from the stored result), so no result taken here is lost.
-- KEYS[1] the step's reply list, KEYS[2] step-due zset. ARGV[1] max results, ARGV[2] lease_ms
-- Returns {now, ask_id1, result1, ask_id2, result2, ...}: results of executions still pending only
-- (a result pushed again for an execution already completed is dropped).
local now = now_ms()
local out = {tostring(now)}
local until_ms = now + tonumber(ARGV[2])
for _ = 1, tonumber(ARGV[1]) do
  local item = redis.call('LPOP', KEYS[1])
  if not item then break end
  local ok, data = pcall(cjson.decode, item)
  if ok and type(data) == 'table' and type(data.ask_id) == 'string' then
    if redis.call('ZSCORE', KEYS[2], data.ask_id) then
      redis.call('ZADD', KEYS[2], until_ms, data.ask_id)
      table.insert(out, data.ask_id)
      table.insert(out, item)
    end
  end
end
return out
