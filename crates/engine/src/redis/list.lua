-- The ids of jobs in one state, newest first, found by walking the `jobs` index (for the states
-- without an index set: see INDEXED in common.lua).
-- ARGV: ns, state, limit, start (rank in `jobs`, newest first = 0), budget (most entries read).
-- Returns {{id...}, next_start}: next_start is where the next call goes on (-1 = `jobs` ended).
-- The walk is cut into calls of at most `budget` entries so Redis never blocks on one for long.
local state, limit = ARGV[2], tonumber(ARGV[3])
local start, budget = tonumber(ARGV[4]), tonumber(ARGV[5])
local CHUNK = 256
local out = {}
local pos = start
while pos < start + budget do
  local ids = redis.call('ZREVRANGE', NS .. 'jobs', pos, pos + math.min(CHUNK, start + budget - pos) - 1)
  for i, id in ipairs(ids) do
    if redis.call('HGET', jkey(id), 'state') == state then
      out[#out + 1] = id
      if #out >= limit then return { out, pos + i } end
    end
  end
  if #ids == 0 then return { out, -1 } end
  pos = pos + #ids
end
return { out, pos }
