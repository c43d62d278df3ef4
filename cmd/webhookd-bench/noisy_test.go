package main

import (
	"slices"
	"testing"
)

// TestNoisyLayouts checks the merchants, subscriptions and receivers of
// noisy and noisy5: the hostile merchants get the same share of events in
// both, noisy5 fans each of their events out to 5 hanging receivers, and
// only the healthy merchants' deliveries are waited for and measured.
func TestNoisyLayouts(t *testing.T) {
	const events = 1000
	for _, tc := range []struct {
		name                   string
		merchants, hangingPer  int
		hostile, hanging, subs int
	}{
		{"noisy", noisySubs, 1, 1, 1, 10},
		{"noisy5", noisySubs, noisy5Hanging, 1, 5, 14},
		{"noisy5 -subscriptions 20", 20, noisy5Hanging, 2, 10, 28},
		{"noisy5 -subscriptions 1", 1, noisy5Hanging, 1, 5, 5},
	} {
		l := newNoisyLayout("m", tc.merchants, tc.hangingPer)
		if len(l.merchants) != tc.merchants || l.hostile != tc.hostile || l.hanging != tc.hanging || len(l.owners) != tc.subs {
			t.Errorf("%s: %d merchants, %d hostile, %d hanging of %d subscriptions; want %d, %d, %d of %d", tc.name,
				len(l.merchants), l.hostile, l.hanging, len(l.owners), tc.merchants, tc.hostile, tc.hanging, tc.subs)
			continue
		}
		if tc.hangingPer == 1 && !slices.Equal(l.owners, l.merchants) {
			t.Errorf("%s: owners %v, want one subscription per merchant %v", tc.name, l.owners, l.merchants)
		}
		for i, m := range l.owners {
			if hostile := slices.Contains(l.merchants[:l.hostile], m); hostile != (i < l.hanging) {
				t.Errorf("%s: subscription %d of %s: hostile %v, hanging %v", tc.name, i, m, hostile, i < l.hanging)
			}
		}

		rcv, err := startReceivers(len(l.owners), l.hanging, 4, newPublishLog(1))
		if err != nil {
			t.Fatal(err)
		}
		f := &fleet{rcv: rcv, merchants: l.owners}
		if got := f.healthyMerchants(); !slices.Equal(got, l.merchants[l.hostile:]) {
			t.Errorf("%s: healthy merchants %v, want %v", tc.name, got, l.merchants[l.hostile:])
		}
		// Events go to the merchants round-robin, as deliver publishes them.
		perEvent := f.healthyPerMerchant()
		var hostileEvents, expected, hangingDeliveries int
		for i := range events {
			m := l.merchants[i%len(l.merchants)]
			expected += int(perEvent[m])
			if slices.Contains(l.merchants[:l.hostile], m) {
				hostileEvents++
				for j, owner := range f.merchants {
					if owner == m && rcv.endpoints[j].hang {
						hangingDeliveries++
					}
				}
			}
		}
		if want := events * tc.hostile / tc.merchants; hostileEvents != want {
			t.Errorf("%s: %d of %d events to hostile merchants, want %d", tc.name, hostileEvents, events, want)
		}
		if want := events - hostileEvents; expected != want {
			t.Errorf("%s: %d healthy deliveries expected, want one per healthy event, %d", tc.name, expected, want)
		}
		if want := hostileEvents * tc.hangingPer; hangingDeliveries != want {
			t.Errorf("%s: %d hanging deliveries, want %d", tc.name, hangingDeliveries, want)
		}
		rcv.close()
	}
}
