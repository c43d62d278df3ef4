-- The schedule of attempts (lanes.go describes the layout), loaded as a
-- Redis function library (functions.go): each call makes the library over
-- its arguments, lanes(ARGV), and runs one of push, take, drop or stats.
-- KEYS[1] is the shard's ready ring, for Cluster's routing, and every
-- other key shares its hash tag (the shard's prefix, ARGV[1]).
--
-- Invariants, kept loose and repaired when seen:
--   a merchant in P:ready may have due work; one in P:wait has none before
--   its score; one in neither has nothing parked. The same holds for a
--   subscription in its merchant's :ready and :wait.

local function lanes(ARGV)
  local P = ARGV[1]

  -- Round-robin stamps come from P:tick, read once per call and written
  -- back at its end (saveTick): a function runs alone, so counting here
  -- gives the stamps INCR would, without a command each. (An error
  -- midway stops the function with its writes kept and the counter
  -- behind them: a few stamps repeat, which only ties a few turns.)
  local tick = nil
  local function stamp()
    if tick == nil then
      tick = tonumber(redis.call('GET', P .. ':tick') or '0')
    end
    tick = tick + 1
    return tick
  end
  local function saveTick()
    if tick ~= nil then
      redis.call('SET', P .. ':tick', tick)
    end
  end

  -- laneRate reads what subscription s's lane knows of its pace: its rate
  -- limit's next turn and rate (per second, 0 for none), and its batch size
  -- and wait (batch.go).
  local function laneRate(s)
    local r = redis.call('HMGET', P .. ':r:' .. s, 'next', 'rate', 'bs', 'bw')
    return { next = tonumber(r[1] or '0'), rate = tonumber(r[2] or '0'), bs = tonumber(r[3] or '0'),
      bw = tonumber(r[4] or '0') }
  end

  -- eligible is when subscription s may next go: its first parked attempt's
  -- due time, or its rate limit's next turn if later; nil if nothing is
  -- parked for it. A batched lane (batch size bs > 1, wait bw ms; batch.go)
  -- goes bw after its first attempt is due, or once bs attempts are due if
  -- that is sooner. r is the lane's pace (laneRate) when the caller has
  -- it, read here otherwise; head the lane's first attempts with their
  -- due times when the caller has them, read here otherwise.
  -- It returns too the first attempt's id, the pace and the first two
  -- attempts read, for take to use without reading them again.
  local function eligible(s, r, head)
    local lane = P .. ':s:' .. s
    head = head or redis.call('ZRANGE', lane, 0, 1, 'WITHSCORES')
    if #head == 0 then
      return nil
    end
    local at = tonumber(head[2])
    r = r or laneRate(s)
    if r.bs > 1 and r.bw > 0 then
      local full = at + r.bw
      local nth = redis.call('ZRANGE', lane, r.bs - 1, r.bs - 1, 'WITHSCORES')
      if #nth > 0 and tonumber(nth[2]) < full then
        full = math.max(tonumber(nth[2]), at)
      end
      at = full
    end
    if r.next > at then
      at = r.next
    end
    return at, head[1], r, head
  end

  -- placeSubscription puts subscription s of merchant m where it belongs at
  -- now, given when it may next go (at, from eligible): in m's ready ring
  -- (keeping its stamp), in m's wait set, or nowhere. r is its pace when
  -- the caller read it; inReady: s is in m's ready ring (a take just read
  -- it there), and so not in the wait set. It returns whether s is in the
  -- ready ring after.
  local function placeSubscription(m, s, now, at, r, inReady)
    local ready, wait = P .. ':m:' .. m .. ':ready', P .. ':m:' .. m .. ':wait'
    if at == nil then
      redis.call('ZREM', ready, s)
      redis.call('ZREM', wait, s)
      local nxt = r and r.next or tonumber(redis.call('HGET', P .. ':r:' .. s, 'next') or '0')
      if nxt > now then
        -- The next turn outlives the lane for as long as it matters.
        redis.call('PEXPIREAT', P .. ':r:' .. s, nxt + 1000)
      else
        redis.call('DEL', P .. ':r:' .. s)
      end
    elseif at <= now then
      if not inReady then
        redis.call('ZREM', wait, s)
        if not redis.call('ZSCORE', ready, s) then
          redis.call('ZADD', ready, stamp(), s)
        end
      end
      return true
    else
      redis.call('ZREM', ready, s)
      redis.call('ZADD', wait, at, s)
    end
    return false
  end

  -- placeMerchant puts merchant m where it belongs: in the ready ring while
  -- a subscription of it is ready (keeping its stamp), else in the wait set
  -- at its first parked time, else nowhere. inReady: m is in the ready
  -- ring (a take just read it there), and so not in the wait set. It
  -- returns whether m is in the ready ring after.
  local function placeMerchant(m, inReady)
    if redis.call('ZCARD', P .. ':m:' .. m .. ':ready') > 0 then
      if inReady then
        return true
      end
      redis.call('ZREM', P .. ':wait', m)
      if not redis.call('ZSCORE', P .. ':ready', m) then
        redis.call('ZADD', P .. ':ready', stamp(), m)
      end
      return true
    end
    redis.call('ZREM', P .. ':ready', m)
    local first = redis.call('ZRANGE', P .. ':m:' .. m .. ':wait', 0, 0, 'WITHSCORES')
    if #first == 0 then
      redis.call('ZREM', P .. ':wait', m)
    else
      redis.call('ZADD', P .. ':wait', first[2], m)
    end
    return false
  end

  -- push(P, wake channel, wake message, then per attempt: merchant,
  -- subscription, id, due ms, rate, task, batch size, batch wait ms) parks
  -- attempts, publishes the wake message, and returns how many were new;
  -- rate is the lane's deliveries per second as the attempt knew it (0:
  -- none), the batch its size and wait (0: none).
  local function push()
    local added = 0
    -- The lanes this call parks in, in first-seen order, each with what
    -- its last attempt knew of it (m, rate, batch size and wait): placed
    -- once each below, after all its attempts are parked, which leaves
    -- the lane where placing it after each would (its first due time only
    -- falls as attempts are added).
    local lanesSeen, order = {}, {}
    local i = 4
    while i + 7 <= #ARGV do
      local m, s, id, due, task = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]), ARGV[i + 5]
      if redis.call('ZADD', P .. ':s:' .. s, 'NX', due, id) == 1 then
        added = added + 1
        redis.call('HSET', P .. ':p:' .. s, id, task)
      end
      if lanesSeen[s] == nil then
        order[#order + 1] = s
      end
      lanesSeen[s] = { m, ARGV[i + 4], ARGV[i + 6], ARGV[i + 7] }
      i = i + 8
    end
    if added > 0 then
      redis.call('HINCRBY', P .. ':stats', 'parked', added)
    end
    for _, s in ipairs(order) do
      local m, rate, bs, bw = unpack(lanesSeen[s])
      local r = P .. ':r:' .. s
      redis.call('PERSIST', r)
      redis.call('HSET', r, 'm', m, 'rate', rate, 'bs', bs, 'bw', bw)
      if not redis.call('ZSCORE', P .. ':m:' .. m .. ':ready', s) then
        local at = eligible(s)
        redis.call('ZADD', P .. ':m:' .. m .. ':wait', 'LT', at, s)
        if not redis.call('ZSCORE', P .. ':ready', m) then
          redis.call('ZADD', P .. ':wait', 'LT', at, m)
        end
      end
    end
    redis.call('PUBLISH', ARGV[2], ARGV[3])
    return added
  end

  -- promote moves the members of a wait set due by now into its ready ring.
  local function promote(wait, ready, now)
    local due = redis.call('ZRANGEBYSCORE', wait, '-inf', now, 'LIMIT', 0, 256)
    for _, member in ipairs(due) do
      redis.call('ZREM', wait, member)
      if not redis.call('ZSCORE', ready, member) then
        redis.call('ZADD', ready, stamp(), member)
      end
    end
  end

  -- take(P, now, want, share, subscription cap, lendable, merchants to scan,
  --      held ms, n, (merchant, running)×n, n, (subscription, room)×n,
  --      n, unlendable×n)
  -- returns {next due ms or 0, 1 if due work was left, then per unit taken
  -- id, task, n and its n companions as id, task, 0}: a unit is one attempt,
  -- or a batched lane's first due attempt and up to size-1 more due by now
  -- (batch.go), and fills one slot. Each attempt taken is noted in P:taken
  -- for held ms, so that the sweeper does not take it for lost before its
  -- worker leased its delivery.
  local function take()
    local now, want, share = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
    local subCap, lendable, scan = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
    local held = tonumber(ARGV[8])
    redis.call('ZREMRANGEBYSCORE', P .. ':taken', '-inf', now - held)
    local running, room, unlendable = {}, {}, {}
    local i = 9
    local n = tonumber(ARGV[i]); i = i + 1
    for _ = 1, n do running[ARGV[i]] = tonumber(ARGV[i + 1]); i = i + 2 end
    n = tonumber(ARGV[i]); i = i + 1
    for _ = 1, n do room[ARGV[i]] = tonumber(ARGV[i + 1]); i = i + 2 end
    n = tonumber(ARGV[i]); i = i + 1
    for _ = 1, n do unlendable[ARGV[i]] = true; i = i + 1 end

    promote(P .. ':wait', P .. ':ready', now)
    -- What this take took, written once at its end: how many attempts left
    -- the parked count, and each one's (time, id) for the taken set.
    local tookCount, tookIDs = 0, {}
    -- A merchant's wait set is promoted once per call: now does not move
    -- within it, and what the call parks for later is due after now.
    local promoted = {}

    -- The rings as this call last read them. A unit taken moves its
    -- subscription and merchant to their rings' ends (new stamps), and
    -- leaves where they were the members it passed over, which stay passed
    -- over while the call runs: a share, a cap or an unlendable
    -- subscription does not change but by a unit of its own, and a member
    -- with nothing due leaves its ring. So the members next in turn are the
    -- rest of the list last read, and a ring is read again only when that
    -- rest gives nothing, the one point where a new read can differ (the
    -- members stamped meanwhile, those beyond the list). Reading both rings
    -- for every unit cost two ZRANGEs a unit, three while lending, each
    -- member made a Lua string every time; TestLanesTakeAsBefore checks
    -- that the attempts handed over, and their order, are those of the
    -- take that read afresh (testdata/lanes_fresh_reads.lua).
    local subLists = {}
    local out = { 0, 0 }
    -- gaveNothing[m]: merchant m was looked at in full and gave no unit,
    -- nor took any attempt out (a unit whose task was gone): its rings are
    -- as they were, and it gives nothing again in this call.
    local gaveNothing = {}

    -- fromMerchant takes one due attempt of merchant m, round-robin over its
    -- ready subscriptions; lent: the slot is beyond m's share. It returns
    -- too whether that subscription is still ready.
    local function fromMerchant(m, lent)
      local ready = P .. ':m:' .. m .. ':ready'
      if not promoted[m] then
        promote(P .. ':m:' .. m .. ':wait', ready, now)
        promoted[m] = true
      end
      -- fromList looks at subs[from], subs[from + 1], … in turn, each
      -- subscription once in this call (as one read would: one whose unit
      -- lost its task is stamped to the end, and a new read meets it
      -- again), and returns the position it took a unit at, and the unit.
      local visited = {}
      local function fromList(seen, from)
        local subs = seen.subs
        -- Those stamped in this call go after the last: the next call's.
        local last = #subs
        seen.next = last + 1
        for j = from, last do
          local s = subs[j]
          if not visited[s] then
            visited[s] = true
            local left = room[s] or subCap
            -- Within its share a subscription keeps to its cap; a lent slot
            -- goes only to one whose last attempt did not time out, cap or not.
            local fits = left > 0
            if lent then fits = not unlendable[s] end
            if fits then
              local at, id, r, head = eligible(s)
              if at ~= nil and at <= now then
                local bs = r.bs
                redis.call('ZREM', P .. ':s:' .. s, id)
                local task = redis.call('HGET', P .. ':p:' .. s, id)
                redis.call('HDEL', P .. ':p:' .. s, id)
                tookCount = tookCount + 1
                local companions = {}
                if bs > 1 then
                  for _, cid in ipairs(redis.call('ZRANGEBYSCORE', P .. ':s:' .. s, '-inf', now, 'LIMIT', 0, bs - 1)) do
                    redis.call('ZREM', P .. ':s:' .. s, cid)
                    local ctask = redis.call('HGET', P .. ':p:' .. s, cid)
                    redis.call('HDEL', P .. ':p:' .. s, cid)
                    tookCount = tookCount + 1
                    tookIDs[#tookIDs + 1] = now
                    tookIDs[#tookIDs + 1] = cid
                    if ctask then
                      companions[#companions + 1] = cid
                      companions[#companions + 1] = ctask
                    end
                  end
                end
                if r.rate > 0 then
                  r.next = math.max(r.next, now) + math.ceil(1000 / r.rate)
                  redis.call('HSET', P .. ':r:' .. s, 'next', r.next)
                end
                room[s] = left - 1
                tookIDs[#tookIDs + 1] = now
                tookIDs[#tookIDs + 1] = id
                redis.call('ZADD', ready, 'XX', stamp(), s)
                -- The lane's next is the second attempt read with the
                -- first, unless the unit took more (a batch, which reads).
                local rest = nil
                if bs <= 1 then
                  rest = { head[3], head[4] }
                end
                local stays = placeSubscription(m, s, now, (eligible(s, r, rest)), r, true)
                if stays and seen.whole then
                  -- Stamped to the ring's end: so in the list.
                  subs[#subs + 1] = s
                end
                if not task and #companions > 0 then
                  -- The first's task is gone (the sweeper parks it again): the
                  -- next leads the unit.
                  id, task = table.remove(companions, 1), table.remove(companions, 1)
                end
                if task then
                  return j, id, task, companions, stays
                end
              else
                placeSubscription(m, s, now, at, r, true)
              end
            end
          end
        end
        return nil
      end
      -- read reads the ring; whole: it read every member.
      local function read()
        local subs = redis.call('ZRANGE', ready, 0, scan + 15)
        return { subs = subs, next = 1, lent = lent, whole = #subs < scan + 16 }
      end
      local seen, fresh = subLists[m], false
      if not (seen and seen.lent == lent) then
        seen, fresh = read(), true
      end
      local j, id, task, companions, stays = fromList(seen, seen.next)
      if not j and not fresh and not seen.whole then
        seen = read()
        j, id, task, companions, stays = fromList(seen, 1)
      end
      subLists[m] = seen
      if not j then
        return nil
      end
      seen.next = j + 1
      return id, task, companions, stays
    end

    -- tryMerchant looks at merchant m in the given pass; it returns whether
    -- m gave a unit, which it adds to out, whether m took attempts out
    -- without giving one (so that it stays where it was in the ring with
    -- its rings changed, and the list read must be read again), and, when
    -- it gave one, whether m is still in the ready ring (at its end).
    local function tryMerchant(m, pass)
      if gaveNothing[m] then
        return false, false
      end
      local busy = running[m] or 0
      if pass == 1 and busy >= share then
        return false, false
      end
      local before = tookCount
      local id, task, companions, stays = fromMerchant(m, busy >= share)
      if not id then
        placeMerchant(m, true)
        if tookCount == before then
          gaveNothing[m] = true
          return false, false
        end
        return false, true
      end
      running[m] = busy + 1
      redis.call('ZADD', P .. ':ready', 'XX', stamp(), m)
      if not stays then
        -- Its subscription left the ready ring: is another there?
        stays = placeMerchant(m, true)
      end
      out[#out + 1] = id
      out[#out + 1] = task
      out[#out + 1] = #companions / 2
      for c = 1, #companions, 2 do
        out[#out + 1] = companions[c]
        out[#out + 1] = companions[c + 1]
        out[#out + 1] = 0
      end
      return true, false, stays
    end

    -- scanMerchants looks at the merchants of cur.list from cur.next on,
    -- each once in a pass of a unit (as one read would), and returns
    -- whether one gave a unit and whether one took attempts out without.
    local function scanMerchants(cur, tried, pass)
      local changed = false
      local list = cur.list
      local from, last = cur.next, #list
      cur.next = last + 1
      for j = from, last do
        local m = list[j]
        if not tried[m] then
          tried[m] = true
          local gave, took, stays = tryMerchant(m, pass)
          changed = changed or took
          if gave then
            cur.next = j + 1
            if stays and cur.whole then
              -- Stamped to the ring's end: so in the list.
              list[#list + 1] = m
            end
            return true, changed
          end
        end
      end
      return false, changed
    end
    local function readMerchants(pass)
      local list = redis.call('ZRANGE', P .. ':ready', 0, scan - 1)
      return { list = list, next = 1, pass = pass, whole = #list < scan }
    end

    local units = 0
    -- The merchants' ring as last read (as subLists), for which pass.
    local merchants = nil
    -- withinSharesDone: a pass within shares looked at the whole ring and
    -- found nothing without taking an attempt out; units lent since change
    -- no share below it nor add a merchant, so it finds nothing again.
    local withinSharesDone = false
    for _ = 1, want do
      local got = false
      for pass = 1, 2 do
        -- A lent slot must leave the reserve free: lendable counts the
        -- free slots beyond it, and each unit of this call fills one.
        if pass == 2 and units >= lendable then
          break
        end
        if pass == 2 or not withinSharesDone then
          -- The rest of the list last read for this pass, then, unless it
          -- held the whole ring, a new read.
          local tried, cur, fresh = {}, merchants, false
          if cur == nil or cur.pass ~= pass then
            cur, fresh = readMerchants(pass), true
          end
          local before = tookCount
          local changed
          got, changed = scanMerchants(cur, tried, pass)
          if not got and not fresh and not cur.whole then
            cur = readMerchants(pass)
            local again
            got, again = scanMerchants(cur, tried, pass)
            changed = changed or again
          end
          merchants = cur
          if changed then
            merchants = nil
          end
          if not got and pass == 1 and cur.whole and tookCount == before then
            withinSharesDone = true
          end
        end
        if got then
          units = units + 1
          break
        end
      end
      if not got then break end
    end
    if tookCount > 0 then
      redis.call('HINCRBY', P .. ':stats', 'parked', 0 - tookCount)
      -- In pieces: a take of batches notes thousands, beyond what one
      -- unpack may spread.
      for c = 1, #tookIDs, 2000 do
        redis.call('ZADD', P .. ':taken', unpack(tookIDs, c, math.min(c + 1999, #tookIDs)))
      end
    end
    -- The next wake: the first parked merchant's time, or a parked
    -- subscription's of a merchant still in the ring (a rate limit's turn).
    local function sooner(key)
      local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
      if #first > 0 and (out[1] == 0 or tonumber(first[2]) < out[1]) then
        out[1] = tonumber(first[2])
      end
    end
    sooner(P .. ':wait')
    for _, m in ipairs(redis.call('ZRANGE', P .. ':ready', 0, scan - 1)) do
      sooner(P .. ':m:' .. m .. ':wait')
    end
    -- Due work left in the ring was held back (a share, a cap, the
    -- reserve): a slot freed may take it. None left: only new work can.
    if redis.call('ZCARD', P .. ':ready') > 0 then
      out[2] = 1
    end
    saveTick()
    return out
  end

  -- drop(P, merchant, lane…) removes every attempt parked in the lanes
  -- (a subscription's and its manual one) and returns how many there were.
  local function drop()
    local m = ARGV[2]
    local n = 0
    for i = 3, #ARGV do
      local s = ARGV[i]
      local k = redis.call('ZCARD', P .. ':s:' .. s)
      n = n + k
      redis.call('DEL', P .. ':s:' .. s, P .. ':p:' .. s, P .. ':r:' .. s)
      if k > 0 then
        redis.call('HINCRBY', P .. ':stats', 'parked', 0 - k)
      end
      redis.call('ZREM', P .. ':m:' .. m .. ':ready', s)
      redis.call('ZREM', P .. ':m:' .. m .. ':wait', s)
    end
    placeMerchant(m)
    saveTick()
    return n
  end

  -- stats(P, now) returns {attempts parked, merchants with due work,
  -- merchants whose work is all parked for later, ms since the oldest due
  -- attempt was due}. The last is sampled: the first 100 merchants of the
  -- ring and the first 20 ready subscriptions of each, where the oldest
  -- waits (the ring's head is what has waited longest for its turn).
  local function stats()
    local now = tonumber(ARGV[2])
    local oldest = now
    for _, m in ipairs(redis.call('ZRANGE', P .. ':ready', 0, 99)) do
      for _, s in ipairs(redis.call('ZRANGE', P .. ':m:' .. m .. ':ready', 0, 19)) do
        local at = eligible(s)
        if at ~= nil and at < oldest then
          oldest = at
        end
      end
    end
    local parked = tonumber(redis.call('HGET', P .. ':stats', 'parked') or '0')
    return { parked, redis.call('ZCARD', P .. ':ready'), redis.call('ZCARD', P .. ':wait'), now - oldest }
  end

  return { push = push, take = take, drop = drop, stats = stats }
end
