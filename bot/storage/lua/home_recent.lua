-- HOME_RECENT: "Recently answered by you": the ask goes to the front of the person's list, once,
-- which keeps the last ARGV[2]. KEYS[1] recent list. ARGV[1] member, ARGV[2] max, ARGV[3] ttl_ms.
recent_push(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
return 1
