-- HOME_RECENT: "Recently answered by you": the ask goes to the front of the person's list, once,
-- which keeps the last ARGV[2]. KEYS[1] recent list. ARGV[1] member, ARGV[2] max, ARGV[3] ttl_ms.
redis.call('LREM', KEYS[1], 0, ARGV[1])
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
