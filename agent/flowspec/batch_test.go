package flowspec

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/apiutil"
	"github.com/osrg/gobgp/v3/pkg/packet/bgp"

	"github.com/scrubd/scrubd/agent/store"
)

// tableEvent is one watch event carrying one FlowSpec route (UDP to dst/32)
// or its withdrawal from peer, as GoBGP delivers a received UPDATE.
func tableEvent(t *testing.T, peer, dst string, withdraw bool) *api.WatchEventResponse {
	t.Helper()
	nlri := v4(dst, 32, num(bgp.FLOW_SPEC_TYPE_IP_PROTO, bgp.DEC_NUM_OP_EQ, 17))
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(0), bgp.NewPathAttributeMpReachNLRI("0.0.0.0", []bgp.AddrPrefixInterface{nlri}),
		bgp.NewPathAttributeExtendedCommunities([]bgp.ExtendedCommunityInterface{bgp.NewTrafficRateExtended(0, 0)})}
	p, err := apiutil.NewPath(nlri, withdraw, attrs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	p.NeighborIp = peer
	return &api.WatchEventResponse{Event: &api.WatchEventResponse_Table{Table: &api.WatchEventResponse_TableEvent{Paths: []*api.Path{p}}}}
}

// A burst of single-route events that queue up while the handler is busy
// is one store transaction per maxBatch events: the store's version (one
// per transaction; one Changed signal, placement pass and state save at
// most each) moves by that, not by the route count. A peer event in the
// burst splits it, in order; withdrawals batch the same way.
func TestBurstIsOneStoreTransaction(t *testing.T) {
	st := store.New(nil, time.Now)
	s := New(Config{ASN: 65010, RouterID: "192.0.2.10", Neighbors: []Neighbor{{Address: "127.0.0.2", ASN: 65000}},
		Allowed: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		st, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	const n = 2500
	for i := range n {
		s.event(tableEvent(t, "127.0.0.2", fmt.Sprintf("10.0.%d.%d", i>>8, i&255), false))
	}
	// A peer event that changes nothing, between two runs of routes.
	s.event(&api.WatchEventResponse{Event: &api.WatchEventResponse_Peer{Peer: &api.WatchEventResponse_PeerEvent{Type: api.WatchEventResponse_PeerEvent_INIT}}})
	for i := range 10 {
		s.event(tableEvent(t, "127.0.0.2", fmt.Sprintf("10.1.0.%d", i), false))
	}
	// The handler starts with the whole burst queued, as when it was busy.
	handler := func() (stop func()) {
		stopc, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			s.handleEvents(stopc)
		}()
		return func() { close(stopc); <-done }
	}
	v0 := st.Version()
	stop := handler()
	waitFor(t, "the burst in the store", func() bool { return st.Len() == n+10 })
	stop()
	// 2500 routes: 1024 + 1024 + 452, then the 10 after the peer event.
	if got, want := st.Version()-v0, uint64(4); got != want {
		t.Errorf("%d routes in %d store versions, want %d", n+10, got, want)
	}
	if a := s.Stats().Accepted; a != n+10 {
		t.Errorf("accepted %d, want %d", a, n+10)
	}
	// The withdrawals of the first 100, queued while no handler runs.
	for i := range 100 {
		s.event(tableEvent(t, "127.0.0.2", fmt.Sprintf("10.0.%d.%d", i>>8, i&255), true))
	}
	v1 := st.Version()
	stop = handler()
	defer stop()
	waitFor(t, "the withdrawals", func() bool { return st.Len() == n+10-100 })
	if got := st.Version() - v1; got != 1 {
		t.Errorf("100 withdrawals in %d store versions, want 1", got)
	}
	if w := s.Stats().Withdrawn; w != 100 {
		t.Errorf("withdrawn %d, want 100", w)
	}
}
