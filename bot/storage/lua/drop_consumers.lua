-- DROP_CONSUMERS: remove consumers of the group that have nothing pending and were idle longer
-- than ARGV[2] (replicas that restarted under a new name), never ARGV[1] (the caller). Atomic, so
-- no entry can be delivered to a consumer between the check and its removal.
-- KEYS[1] intake stream. ARGV[1] own consumer name, ARGV[2] min idle ms, ARGV[3] group.
-- Returns the names removed.
local removed = {}
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[3])) do
  local info = {}
  for i = 1, #c, 2 do info[c[i]] = c[i + 1] end
  if info['name'] ~= ARGV[1] and tonumber(info['pending']) == 0
      and tonumber(info['idle']) > tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[3], info['name'])
    table.insert(removed, info['name'])
  end
end
return removed
