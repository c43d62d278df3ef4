package pollcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// followWait is how long each read of -follow waits for a delivery: the
// longest the API allows, so that an idle line costs one request every
// 30 seconds.
const followWait = 30 * time.Second

// Reader prints what a poll subscription holds.
type Reader struct {
	Client Client
	// SubscriptionID is the poll subscription read.
	SubscriptionID string
	// Start is where the first read starts (an iterator or since); zero:
	// at the oldest unacknowledged delivery. Limit bounds each read.
	Start Query
	// Ack reads on page after page, each read acknowledging the page
	// before it, until the line is read to its end, and acknowledges that
	// last page too. Without it one page is read and nothing is
	// acknowledged (beyond Start.Iterator, as any read with it).
	Ack bool
	// Follow (with Ack) keeps reading, waiting for new deliveries with
	// long polling, until the context ends.
	Follow bool
	// Out gets one line per delivery; Log the iterator and progress.
	Out, Log io.Writer
}

// Run reads and prints as configured. Following ends without an error
// when ctx is cancelled (an interrupt).
func (r Reader) Run(ctx context.Context) error {
	if r.Follow && !r.Ack {
		return errors.New("-follow reads on past what it printed, which acknowledges it: give -ack too")
	}
	q := r.Start
	for {
		if r.Follow {
			q.Wait = followWait
		}
		p, err := r.Client.Read(ctx, r.SubscriptionID, q)
		if err != nil {
			if r.Follow && ctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, it := range p.Data {
			fmt.Fprintln(r.Out, Line(it))
		}
		if !r.Ack {
			fmt.Fprintf(r.Log, "iterator %s (done: %v); read on with -iterator to acknowledge these\n", p.Iterator, p.Done)
			return nil
		}
		moved := p.Iterator != q.Iterator
		q = Query{Iterator: p.Iterator, Limit: r.Start.Limit}
		if p.Done && !r.Follow {
			if moved {
				// Acknowledge the last page: a read with its iterator.
				if _, err := r.Client.Read(ctx, r.SubscriptionID, q); err != nil {
					return err
				}
			}
			fmt.Fprintf(r.Log, "acknowledged up to iterator %s\n", p.Iterator)
			return nil
		}
	}
}

// Line is one delivery as printed: its time, type, webhook-id, delivery
// id and body, tab-separated.
func Line(it Item) string {
	test := ""
	if it.Test {
		test = " (test)"
	}
	return fmt.Sprintf("%s\t%s%s\t%s\t%s\t%s", it.CreatedAt.UTC().Format(time.RFC3339Nano), it.EventType, test, it.ID, it.DeliveryID, it.Body)
}
