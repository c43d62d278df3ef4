package queue

import (
	"encoding/json"
	"strconv"

	"github.com/webhookd/webhookd/internal/store"
)

// A batched subscription's lane (lanes.lua keeps its size and wait in the
// lane's :r: hash, as "bs" and "bw", beside its rate) is taken whole: when
// its first attempt is due, a take hands over with it up to size-1 more of
// its attempts due by then, as one unit that fills one slot (one request).
// The lane becomes eligible wait ms after its first attempt is due, or as
// soon as size attempts are due, whichever is first: the schedule's wait
// sets hold that time, so the workers wake for it as for any due time,
// without polling. A rate limit gives a batch one turn: it paces requests.

// withBatch sets the batch of a subscription on its attempt's task.
func withBatch(a *Attempt, b *store.Batch) {
	if b != nil {
		a.BatchSize, a.BatchWaitMS = b.MaxSize, b.MaxWaitMS
	}
}

// laneBatch is the lane's batch as push writes it: none for a manual
// attempt (redeliver, recover), which goes alone and at once.
func laneBatch(t Attempt) (size, wait string) {
	if t.Trigger == store.TriggerManual || t.BatchSize <= 1 {
		return "0", "0"
	}
	return strconv.Itoa(t.BatchSize), strconv.Itoa(t.BatchWaitMS)
}

// takenUnits reads the units a take answered: per unit its first attempt
// as (id, task, n) and then its n companions as (id, task, 0). An
// unreadable task is dropped: its delivery is pending in Postgres and the
// sweeper pushes it again.
func takenUnits(res []any) []LaneItem {
	out := make([]LaneItem, 0, len(res)/3)
	read := func(i int) (LaneItem, int64, bool) {
		id, _ := res[i].(string)
		payload, _ := res[i+1].(string)
		n, _ := res[i+2].(int64)
		var t Attempt
		if err := json.Unmarshal([]byte(payload), &t); err != nil {
			return LaneItem{}, n, false
		}
		return LaneItem{ID: id, Task: t}, n, true
	}
	for i := 0; i+2 < len(res); {
		first, n, ok := read(i)
		i += 3
		var companions []LaneItem
		for ; n > 0 && i+2 < len(res); n-- {
			if it, _, ok := read(i); ok {
				companions = append(companions, it)
			}
			i += 3
		}
		switch {
		case ok:
			first.Batch = companions
			out = append(out, first)
		case len(companions) > 0:
			// The first is unreadable: the next leads the unit.
			lead := companions[0]
			lead.Batch = companions[1:]
			out = append(out, lead)
		}
	}
	return out
}
