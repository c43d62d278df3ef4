package retry_test

import (
	"fmt"
	"time"

	"github.com/webhookd/webhookd/retry"
)

// A worker records a failed attempt and asks when the next one is due.
func ExampleSchedule_NextAttempt() {
	s := retry.Default()
	failedAt := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

	next, ok := s.NextAttempt(3, failedAt, 0) // production passes retry.RandomJitter()
	fmt.Println(next.Format(time.TimeOnly), ok)

	_, ok = s.NextAttempt(s.Attempts(), failedAt, 0)
	fmt.Println("retry after the last attempt:", ok)
	// Output:
	// 12:00:45 true
	// retry after the last attempt: false
}
