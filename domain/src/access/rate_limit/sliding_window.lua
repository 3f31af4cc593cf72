-- Sliding-window rate limit over two fixed windows, one call per request.
-- ARGV: account id, limit (>= 1), window seconds, usage-hash retention seconds, and 1 to count the request
-- in the usage hash (0 for keys that are no account, such as a web chat visitor's); then any number of
-- pairs: an access stamp's key and the value the caller's cached verification was read under ('' when the
-- stamp was missing). If one differs, the verification is stale: nothing is counted and the answer is
-- {-1, 0, 0, 0}.
-- Keys (documented for dashboards; built here so the time comes from this Redis, not the callers' clocks):
--   frontdesk:rl:{account_id}:{window_start_unix}  integer count, expires after two windows
--   frontdesk:usage:{YYYY-MM-DD}                   hash: {account_id} -> requests, {account_id}:throttled -> 429s
-- Returns {allowed (0|1), used (the limit when refused), reset_seconds, retry_after_seconds}.
for i = 6, #ARGV, 2 do
  if (redis.call('GET', ARGV[i]) or '') ~= ARGV[i + 1] then
    return {-1, 0, 0, 0}
  end
end
local t = redis.call('TIME')
local secs = tonumber(t[1])
local now = secs + tonumber(t[2]) / 1000000
local account = ARGV[1]
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])

local start = math.floor(now / window) * window
local cur_key = 'frontdesk:rl:' .. account .. ':' .. string.format('%d', start)
local prev_key = 'frontdesk:rl:' .. account .. ':' .. string.format('%d', start - window)
local cur = tonumber(redis.call('GET', cur_key) or '0')
local prev = tonumber(redis.call('GET', prev_key) or '0')
local elapsed = now - start
local estimate = prev * (window - elapsed) / window + cur

-- UTC calendar date of `secs` (days-from-civil inverse; Redis Lua has no os.date).
local z = math.floor(secs / 86400) + 719468
local era = math.floor(z / 146097)
local doe = z - era * 146097
local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
local mp = math.floor((5 * doy + 2) / 153)
local day = doy - math.floor((153 * mp + 2) / 5) + 1
local month = mp < 10 and mp + 3 or mp - 9
local year = yoe + era * 400
if month <= 2 then year = year + 1 end
local usage_key = 'frontdesk:usage:' .. string.format('%04d-%02d-%02d', year, month, day)
local record_usage = ARGV[5] ~= '0'
-- Times to live are set by the request that makes the key or its account's field, not on every call (an
-- EXPIRE per call was a fifth of the script's time in Redis).
if record_usage and redis.call('HINCRBY', usage_key, account, 1) == 1 then
  redis.call('EXPIRE', usage_key, ARGV[4])
end

local reset = math.ceil(start + window - now)
if estimate + 1 > limit then
  if record_usage then redis.call('HINCRBY', usage_key, account .. ':throttled', 1) end
  local retry
  if cur + 1 > limit then
    -- This window alone is full: wait for it to end, then for its weight to fall far enough.
    retry = (start + window - now) + window * (1 - (limit - 1) / cur)
  else
    -- The previous window's weight is what blocks: wait for it to fade.
    retry = window - (limit - 1 - cur) * window / prev - elapsed
  end
  -- Refused: nothing remains of the budget, whatever the estimate rounds to.
  return {0, limit, reset, math.max(1, math.ceil(retry))}
end
if redis.call('INCR', cur_key) == 1 then
  redis.call('EXPIRE', cur_key, window * 2)
end
return {1, math.floor(estimate) + 1, reset, 0}
