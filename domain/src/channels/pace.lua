-- The next free send slot of one channel, shared by every replica (messaging/pacing.rs).
-- KEYS[1]: the channel's key; it holds the instant (Unix microseconds on Redis's clock) from which the
-- channel's next send may go. ARGV[1]: the interval between two sends, in microseconds. ARGV[2]: the longest
-- a send waits in its job for its slot, in microseconds.
-- Returns {1, wait}: the send took the slot `wait` microseconds from now, and the next free slot moved one
-- interval on; or {0, later}: the next free slot is further than the longest wait, nothing was taken, and the
-- send should try again in `later` microseconds.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local interval = tonumber(ARGV[1])
local max_wait = tonumber(ARGV[2])
local next_free = tonumber(redis.call('GET', KEYS[1]) or now)
if next_free < now then
  next_free = now
end
if next_free - now > max_wait then
  return {0, next_free - now - math.floor(max_wait / 2)}
end
local following = next_free + interval
-- Integers as text: a Lua number turned into a string keeps only 14 digits.
redis.call('SET', KEYS[1], string.format('%.0f', following), 'PX', string.format('%.0f', math.floor((following - now) / 1000) + 1000))
return {1, next_free - now}
