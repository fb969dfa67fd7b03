-- RENEW: extend the intake lease a delivery still in flight holds (bot/engine/leases.py), so that a
-- slow Slack call keeps its ask while a dead holder's lease runs out within one short lease.
-- KEYS[1] ask hash
-- ARGV[1] owner, ARGV[2] token (the lease's `tries`), ARGV[3] lease_ms
-- Returns {'ok', lease_until} (Redis ms), or {'stale', who}: the lease is no longer this holder's
-- (another replica took the ask over: 'owner#tries'), or it ran out in Redis time ('expired'), or
-- the delivery is over ('done': lease_until 0). A lease that ran out is never brought back: a
-- holder frozen past it may already be replaced, and its writes are refused (stale_lease) for good.
local now = now_ms()
local f = redis.call('HMGET', KEYS[1], 'owner', 'tries', 'lease_until')
if f[1] ~= ARGV[1] or tostring(f[2]) ~= ARGV[2] then
  return {'stale', tostring(f[1] or '') .. '#' .. tostring(f[2] or '')}
end
local until_ms = tonumber(f[3] or '0') or 0
if until_ms == 0 then return {'stale', 'done'} end
if until_ms <= now then return {'stale', 'expired'} end
local renewed = now + tonumber(ARGV[3])
if renewed > until_ms then redis.call('HSET', KEYS[1], 'lease_until', renewed) end
return {'ok', tostring(renewed)}
