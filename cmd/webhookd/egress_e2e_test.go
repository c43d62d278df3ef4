package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/store/storetest"
	"github.com/webhookd/webhookd/internal/testfixtures/connectproxy"
)

// TestServeThroughEgressProxy runs a real `webhookd serve` with
// WEBHOOKD_EGRESS_PROXY and WEBHOOKD_SOURCE_ADDRESSES: a delivery arrives
// through the proxy, which was asked for the receiver's address, and the
// declared addresses are published without a key.
func TestServeThroughEgressProxy(t *testing.T) {
	storetest.FullLane(t, "end-to-end, builds and runs the real binary")
	proxy := connectproxy.New(t, nil)
	e := newEngine(t, "WEBHOOKD_EGRESS_PROXY="+proxy.URL.String(),
		"WEBHOOKD_SOURCE_ADDRESSES=203.0.113.7, 2001:db8:77::/48")
	e.start()
	key := e.keysCreate("m_egress")
	r := newReceiver(t)
	e.subscribe(key, r)
	id := e.publish("m_egress")
	r.wait(t, id, 20*time.Second)
	receiverAddr := strings.TrimPrefix(r.URL, "http://")
	if got := proxy.Connects(); !slices.Contains(got, receiverAddr) {
		t.Errorf("proxy CONNECTs = %v, want one to the receiver %s", got, receiverAddr)
	}

	resp, err := http.Get("http://" + e.public + "/v1/webhook_source_addresses")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/webhook_source_addresses: %d, %v", resp.StatusCode, err)
	}
	if want := []string{"203.0.113.7/32", "2001:db8:77::/48"}; !slices.Equal(body.Data, want) {
		t.Errorf("source addresses = %v, want %v", body.Data, want)
	}
}
