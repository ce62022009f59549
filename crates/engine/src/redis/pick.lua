-- ARGV: ns, key (a sorted set of job ids under the prefix), state, limit, budget.
-- The ids of up to `limit` jobs in `state` among the newest `budget` members of `key` (highest
-- score first), for `list` of a state whose jobs share a set with others (succeeded jobs whose
-- result is pending share `results` with every other terminal state).
local key, state = NS .. ARGV[2], ARGV[3]
local limit, budget = tonumber(ARGV[4]), tonumber(ARGV[5])
local CHUNK = 256
local out = {}
local P = plan('s')
local pos = 0
while pos < budget do
  local ids = redis.call('ZREVRANGE', key, pos, pos + math.min(CHUNK, budget - pos) - 1)
  for _, id in ipairs(ids) do
    if hmget(jkey(id), P)[1] == state then
      out[#out + 1] = id
      if #out >= limit then return out end
    end
  end
  if #ids < CHUNK then return out end
  pos = pos + #ids
end
return out
