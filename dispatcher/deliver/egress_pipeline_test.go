package deliver_test

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/webhookd/webhookd/dispatcher"
	"github.com/webhookd/webhookd/internal/store"
	"github.com/webhookd/webhookd/internal/testfixtures/connectproxy"
	"github.com/webhookd/webhookd/internal/testfixtures/dispatchertest"
)

// TestDeliveriesGoThroughTheEgressProxy runs the whole pipeline with an
// egress proxy: a delivery arrives through it, and, with private targets
// not allowed, names resolving to forbidden addresses are still
// target_blocked at every attempt while the proxy never sees a CONNECT for
// them.
func TestDeliveriesGoThroughTheEgressProxy(t *testing.T) {
	t.Parallel()
	t.Run("delivered", func(t *testing.T) {
		t.Parallel()
		e := dispatchertest.New(t)
		rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
		proxy := connectproxy.New(t, nil)
		sub, _ := e.Subscribe("m1", rcv.URL+"/hook", "*")
		d, _ := e.Dispatcher(func(c *dispatcher.Config) { c.EgressProxy = proxy.URL })
		e.Run(d)
		ev := e.Publish(d, "m1", "payout.paid")
		ds := e.Deliveries(ev.ID)
		if len(ds) != 1 || ds[0].SubscriptionID != sub.ID {
			t.Fatalf("deliveries = %+v, want one to the subscription", ds)
		}
		if del := e.WaitSettled(ds[0].ID, 10*time.Second); del.Status != store.DeliverySucceeded {
			t.Fatalf("delivery %s, want succeeded", del.Status)
		}
		if n := len(rcv.Got()); n != 1 {
			t.Errorf("receiver got %d requests, want 1", n)
		}
		if got := proxy.Connects(); len(got) != 1 || got[0] != rcv.Listener.Addr().String() {
			t.Errorf("proxy CONNECTs = %v, want one to %s", got, rcv.Listener.Addr())
		}
	})
	t.Run("blocked", func(t *testing.T) {
		t.Parallel()
		e := dispatchertest.New(t)
		rcv := dispatchertest.NewReceiver(t, dispatchertest.Answer(http.StatusOK))
		port := strconv.Itoa(rcv.Listener.Addr().(*net.TCPAddr).Port)
		proxy := connectproxy.New(t, nil)
		names := map[string][]netip.Addr{
			"private.merchant.test":  {netip.MustParseAddr("10.0.0.1")},
			"metadata.merchant.test": {netip.MustParseAddr("169.254.169.254")},
			"loopback.merchant.test": {netip.MustParseAddr("127.0.0.1")},
			"rebound.merchant.test":  {netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("127.0.0.1")},
		}
		want := map[uuid.UUID]expectation{}
		for _, host := range []string{"localhost", "127.0.0.1", "private.merchant.test", "metadata.merchant.test",
			"loopback.merchant.test", "rebound.merchant.test"} {
			sub, _ := e.Subscribe("m1", "http://"+net.JoinHostPort(host, port)+"/hook", "*")
			want[sub.ID] = expectation{host, "failed, target_blocked, no status"}
		}
		d, _ := e.Dispatcher(func(c *dispatcher.Config) {
			c.AllowPrivateTargets = false
			c.EgressProxy = proxy.URL
		}, dispatchertest.DialThrough(t, fakeResolver(t, names)))
		e.Run(d)
		ev := e.Publish(d, "m1", "payout.paid")
		everyAttemptFails(t, e, ev, want)
		if n := len(rcv.Got()); n != 0 {
			t.Errorf("the receiver behind the blocked names got %d requests", n)
		}
		if got := proxy.Connects(); len(got) != 0 {
			t.Errorf("the proxy was asked for blocked targets: %v", got)
		}
	})
}
