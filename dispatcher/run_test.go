package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hibiken/asynq"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
	"github.com/webhookd/webhookd/producer"
)

// TestStoppedWorkerMidAttempt stops the dispatcher while a receiver holds
// the first attempt, then starts a new one: the delivery completes.
func TestStoppedWorkerMidAttempt(t *testing.T) {
	t.Parallel()
	e := dispatchertest.New(t)
	inFlight := make(chan struct{}, 1)
	rcv := dispatchertest.NewReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			inFlight <- struct{}{}
			<-r.Context().Done() // hangs until the client gives up
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e.Subscribe("m1", rcv.URL, "*")
	first, _ := e.Dispatcher()
	stop := e.Run(first)
	ev := e.Publish(first, "m1", "payout.paid")
	<-inFlight
	stop() // drains: the attempt in flight ends (timeout) and is recorded
	second, _ := e.Dispatcher()
	e.Run(second)
	del := e.WaitSettled(e.Deliveries(ev.ID)[0].ID, 10*time.Second)
	if del.Status != store.DeliverySucceeded || del.AttemptCount != 2 || *del.Attempts[0].Error != "timeout" {
		t.Fatalf("delivery %s after %d attempts (%+v), want succeeded on attempt 2 after a timeout", del.Status, del.AttemptCount, del.Attempts)
	}
}

// TestIngestOutlivesPostgres: an ingest task that used up its retries while
// Postgres was down is never archived into a state where a re-publish of
// the same event is swallowed. Once Postgres is back the event is stored
// once and delivered once.
func TestIngestOutlivesPostgres(t *testing.T) {
	t.Parallel()
	pg := storetest.NewPostgres(t)
	e := dispatchertest.NewOnPostgres(t, pg)
	rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
	e.Subscribe("m1", rcv.URL, "*")
	d, reg := e.Dispatcher(func(c *dispatcher.Config) { c.TaskRetryCap = 100 * time.Millisecond })
	e.Run(d)
	pg.Stop()

	// The producer's task, with a budget of one retry: what 25 retries are
	// to a long outage.
	ev := producer.Event{ID: uuid.NewString(), MerchantID: "m1", Type: "payout.paid", Payload: json.RawMessage(`{"id":"po_1"}`)}
	payload, _ := json.Marshal(ev)
	client := asynq.NewClient(e.Cfg.Redis)
	defer client.Close()
	if _, err := client.Enqueue(asynq.NewTask(producer.TaskIngest, payload), asynq.Queue(producer.Queue),
		asynq.TaskID("e:"+ev.ID), asynq.MaxRetry(1)); err != nil {
		t.Fatal(err)
	}
	insp := asynq.NewInspector(e.Cfg.Redis)
	defer insp.Close()
	e.WaitFor("the task to use up its retries", 30*time.Second, func() bool {
		info, err := insp.GetTaskInfo(producer.Queue, "e:"+ev.ID)
		return errors.Is(err, asynq.ErrTaskNotFound) || (err == nil && info.State == asynq.TaskStateArchived)
	})
	if got := dispatchertest.CounterWith(t, reg, "webhookd_tasks_total", "result", "renewed"); got < 1 {
		t.Errorf("webhookd_tasks_total{result=renewed} = %v, want the task enqueued afresh", got)
	}
	// The core API, unsure, publishes the event again.
	p := producer.New(e.Cfg.Redis)
	t.Cleanup(func() { p.Close() })
	if err := p.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	pg.Start()

	e.WaitFor("the event's delivery once Postgres is back", 60*time.Second, func() bool { return len(rcv.Got()) >= 1 })
	var dels []store.Delivery
	e.WaitFor("the delivery to be recorded", 10*time.Second, func() bool {
		dels = e.Deliveries(uuid.MustParse(ev.ID))
		return len(dels) == 1 && dels[0].Status == store.DeliverySucceeded
	})
	if dels[0].AttemptCount != 1 {
		t.Errorf("the delivery took %d attempts, want 1", dels[0].AttemptCount)
	}
}
