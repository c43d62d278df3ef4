package dispatcher

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/webhookd/webhookd/dispatcher/internal/metrics"
	"github.com/webhookd/webhookd/dispatcher/queue"
	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/producer"
)

// TestGiveUpIsTheSameForEveryHandler: whatever its type, a task whose
// handler keeps failing for an internal reason is, on its last retry,
// enqueued afresh under a new id; asynq never archives it, so its id never
// blocks the re-enqueue that replaces it.
func TestGiveUpIsTheSameForEveryHandler(t *testing.T) {
	t.Parallel()
	rd := storetest.NewRedis(t)
	opt := asynq.RedisClientOpt{Network: "unix", Addr: rd.Socket}
	tasks, err := queue.NewEnqueuer(opt, time.Second, 0, clock.System{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tasks.Close() })
	m, err := metrics.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &worker{cfg: Config{TaskRetryCap: 50 * time.Millisecond}, tasks: tasks, metrics: m, logger: slog.New(slog.DiscardHandler)}

	types := []struct{ task, queue string }{
		{producer.TaskIngest, producer.Queue},
		{queue.TaskAttempt, queue.QueueDeliveries},
		{queue.TaskFirstAttempts, queue.QueueDeliveries},
		{queue.TaskSweep, queue.QueueMaintenance},
		{queue.TaskMaintenance, queue.QueueMaintenance},
	}
	mux := asynq.NewServeMux()
	mux.Use(w.policy)
	for _, ty := range types {
		mux.HandleFunc(ty.task, func(context.Context, *asynq.Task) error { return errors.New("postgres is down") })
	}
	srv := asynq.NewServer(opt, asynq.Config{Concurrency: 4, RetryDelayFunc: w.retryDelay, IsFailure: isFailure,
		Queues:            map[string]int{queue.QueueDeliveries: 1, producer.Queue: 1, queue.QueueMaintenance: 1},
		TaskCheckInterval: 10 * time.Millisecond, DelayedTaskCheckInterval: 50 * time.Millisecond,
		LogLevel: asynq.FatalLevel})
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)

	client := asynq.NewClient(opt)
	t.Cleanup(func() { client.Close() })
	insp := asynq.NewInspector(opt)
	t.Cleanup(func() { insp.Close() })
	for _, ty := range types {
		if _, err := client.Enqueue(asynq.NewTask(ty.task, []byte(`{}`)), asynq.TaskID("t:"+ty.task),
			asynq.Queue(ty.queue), asynq.MaxRetry(1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, ty := range types {
		t.Run(ty.task, func(t *testing.T) {
			deadline := time.Now().Add(20 * time.Second)
			for testutil.ToFloat64(m.Tasks.WithLabelValues(ty.task, metrics.ResultRenewed)) < 1 {
				if time.Now().After(deadline) {
					t.Fatal("the task was not enqueued afresh after its last retry")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if info, err := insp.GetTaskInfo(ty.queue, "t:"+ty.task); err == nil {
				t.Errorf("the original task is still there, %v", info.State)
			}
			archived, err := insp.ListArchivedTasks(ty.queue)
			if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
				t.Fatal(err)
			}
			for _, a := range archived {
				if strings.HasPrefix(a.ID, "t:"+ty.task) {
					t.Errorf("task %s archived", a.ID)
				}
			}
		})
	}
}

// TestPeriodicJobOutlivesACrashedRun: a periodic job's run cut off by a
// killed process, which asynq's recoverer ends by archiving its task, does
// not stop the job: while one is queued a second is dropped, and once the
// interval has passed the job is enqueued again. A fixed task id kept the
// archived task's id taken for days, and the sweeper of every instance
// with it.
func TestPeriodicJobOutlivesACrashedRun(t *testing.T) {
	t.Parallel()
	rd := storetest.NewRedis(t)
	opt := asynq.RedisClientOpt{Network: "unix", Addr: rd.Socket}
	client := asynq.NewClient(opt)
	t.Cleanup(func() { client.Close() })
	insp := asynq.NewInspector(opt)
	t.Cleanup(func() { insp.Close() })

	opts := periodicOptions(time.Second)
	first, err := client.Enqueue(asynq.NewTask(queue.TaskSweep, nil), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Enqueue(asynq.NewTask(queue.TaskSweep, nil), opts...); !errors.Is(err, asynq.ErrDuplicateTask) {
		t.Fatalf("a second sweep while one is queued: %v, want it dropped as a duplicate", err)
	}
	// What a crash mid-run leaves once asynq's recoverer has seen it.
	if err := insp.ArchiveTask(queue.QueueMaintenance, first.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := client.Enqueue(asynq.NewTask(queue.TaskSweep, nil), opts...)
		if err == nil {
			return
		}
		if !errors.Is(err, asynq.ErrDuplicateTask) || time.Now().After(deadline) {
			t.Fatalf("the sweep after a crashed run: %v; it must be enqueued again within its interval", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The housekeeping server polls its queues a few times per shortest
// periodic interval, never more often than the ingest server and never
// less than once a second.
func TestHousekeepingPollsPerShortestInterval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                                    string
		sweep, maintenance, autoDisable, replay time.Duration
		want                                    time.Duration
	}{
		{"the defaults: replays every second", 30 * time.Second, time.Hour, 5 * time.Minute, time.Second, 250 * time.Millisecond},
		{"long intervals: at least once a second", time.Minute, time.Hour, time.Hour, time.Minute, time.Second},
		{"a test's short sweep", 40 * time.Millisecond, time.Hour, time.Hour, time.Second, 20 * time.Millisecond},
		{"the shortest of all counts", 10 * time.Second, 400 * time.Millisecond, time.Hour, time.Second, 100 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &worker{cfg: Config{SweepInterval: c.sweep, MaintenanceInterval: c.maintenance,
				AutoDisableInterval: c.autoDisable, ReplayInterval: c.replay}}
			if got := w.housekeepingCheck(); got != c.want {
				t.Errorf("housekeepingCheck() = %v, want %v", got, c.want)
			}
		})
	}
}

// The ingest server moves its retried tasks back at half the shortest
// wait before a retry, so that a retry comes at most half its wait late,
// between 20 ms and 500 ms.
func TestIngestRetriesMoveBackAtHalfTheirWait(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		retryCap time.Duration
		want     time.Duration
	}{
		{"the default cap: the first retry waits a second", time.Minute, 500 * time.Millisecond},
		{"a cap under a second", 600 * time.Millisecond, 300 * time.Millisecond},
		{"a test's short cap", 10 * time.Millisecond, 20 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &worker{cfg: Config{TaskRetryCap: c.retryCap}}
			if got := w.ingestRetryCheck(); got != c.want {
				t.Errorf("ingestRetryCheck() = %v, want %v", got, c.want)
			}
			for n := range 8 {
				if wait := w.retryDelay(n, errors.New("postgres unreachable"), nil); w.ingestRetryCheck() > wait/2 && w.ingestRetryCheck() > 20*time.Millisecond {
					t.Errorf("retry %d waits %v, and may come %v late", n, wait, w.ingestRetryCheck())
				}
			}
		})
	}
}
