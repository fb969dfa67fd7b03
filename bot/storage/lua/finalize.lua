-- FINALIZE: mark an ended ask's Slack messages as updated (so the sweeper stops retrying).
-- KEYS[1] ask hash. ARGV[1] message count that was updated.
-- Returns finalize_messages' answer (_common.lua): {1} done, {0}, {2, until_ms} or {-1}.
-- On Redis Cluster, where the channel sets and the timers are in other slots; finish.lua elsewhere.
return finalize_messages(KEYS[1], ARGV[1])
