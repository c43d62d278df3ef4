package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/signer"
)

// raw posts signed deliveries straight from the bench to the same kind of
// receivers, with the engine's concurrency and a keep-alive transport: the
// ceiling of HTTP delivery on this machine, with no queue and no database.
func raw(ctx context.Context, l *lab) (*report, error) {
	subs := orDefault(l.cfg.subscriptions, throughputSubs)
	events := orDefault(l.cfg.events, throughputEvents)
	payload := orDefault(l.cfg.payload, defaultPayload)
	conc := l.cfg.concurrency
	r := &report{scenario: "raw", params: fmt.Sprintf("%d events × %d subscriptions, %d B payload, %d concurrent senders",
		events, subs, payload, conc)}
	log := newPublishLog(events)
	rcv, err := startReceivers(subs, 0, l.cfg.listeners, log)
	if err != nil {
		return r, err
	}
	defer rcv.close()
	keys := make([]signer.Key, subs)
	for i := range subs {
		secret, err := signer.NewSecret()
		if err != nil {
			return r, err
		}
		if err := rcv.setSecret(i, secret); err != nil {
			return r, err
		}
		keys[i], _ = signer.ParseSecret(secret)
	}
	ids := make([]string, events)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7()).String()
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns = conc * 2
	tr.MaxIdleConnsPerHost = conc
	tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer tr.CloseIdleConnections()
	total := int64(events) * int64(subs)
	deadline := time.Now().Add(l.cfg.duration)
	var next, failed atomic.Int64
	cpuBefore, machineBefore := selfCPU(), machineBusy()
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				k := next.Add(1) - 1
				if k >= total || ctx.Err() != nil || time.Now().After(deadline) {
					return
				}
				ev, sub := int(k/int64(subs)), int(k%int64(subs))
				body := envelope(ids[ev], payloadFor(l.cfg.merchant+"-raw", ev, payload))
				if err := rawPost(ctx, client, rcv.endpoints[sub].url, ids[ev], body, keys[sub], log); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu, machine := selfCPU()-cpuBefore, machineBusy()-machineBefore
	counts := rcv.counts()
	lat := summarize(rcv.latencies(false))
	r.add("deliveries_sent", total, "deliveries")
	r.add("deliveries_received", counts.Unique, "deliveries")
	r.add("failed_posts", failed.Load(), "requests")
	r.add("bad_signatures", counts.BadSignatures, "requests")
	r.add("elapsed_s", elapsed.Seconds(), "s")
	r.add("deliveries_per_s", float64(counts.Unique)/elapsed.Seconds(), "deliveries/s")
	r.add("latency_p50_ms", ms(lat.P50), "ms")
	r.add("latency_p99_ms", ms(lat.P99), "ms")
	if counts.Unique > 0 {
		r.add("cpu_bench_s_per_1k", cpu*1000/float64(counts.Unique), "CPU s")
	}
	r.add("cpu_machine_busy_s", machine, "CPU s")
	r.add("cpu_unattributed_s", machine-cpu, "CPU s")
	r.note("bench CPU covers both the senders and the receivers")
	return r, nil
}

// envelope builds a delivery body shaped like the engine's.
func envelope(id string, payload json.RawMessage) []byte {
	b, _ := json.Marshal(struct {
		ID         string          `json:"id"`
		Type       string          `json:"type"`
		APIVersion string          `json:"api_version"`
		Payload    json.RawMessage `json:"payload"`
		Date       string          `json:"date"`
	}{id, benchEventType, "2026-05-01", payload, time.Now().UTC().Format(time.RFC3339Nano)})
	return b
}

// rawPost posts one signed delivery to url as the engine would, logging
// its send instant for the receiver to time the arrival against.
func rawPost(ctx context.Context, client *http.Client, url, id string, body []byte, key signer.Key, log *publishLog) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	now := time.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "webhookd-bench")
	signer.SetHeaders(req.Header, id, now, body, key)
	log.record(id, now)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("raw post: HTTP %d", resp.StatusCode)
	}
	return nil
}
