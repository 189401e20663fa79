package switchsync

import (
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/dispatch"
	"flowweight/controller/ofswitch"
	"flowweight/internal/testutil"

	"github.com/netrack/openflow/ofp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestDispatchPacketIn: a reactive service's new-connection packet-in is answered with the
// same frame from the same port, marked for a backend with weight and a location on this
// switch and sent through the tables again; a packet-in that names no reactive service placed
// here, or carries part of its frame only, is dropped and counted, never answered.
func TestDispatchPacketIn(t *testing.T) {
	conn := NewFakeConn(1)
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"service", "reason"})
	sent := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sent"}, []string{"service", "backend", "by"})
	s := start(t, conn, Config{Dispatch: DispatchConfig{Dispatcher: dispatch.New(dispatch.Config{}),
		Metrics: DispatchMetrics{Dispatched: sent, Dropped: dropped}}})
	svc := web("web", 5, nil, 0, 600, 400) // a has no weight
	svc.Dispatch = dataplane.DispatchReactive
	group := web("plain", 6, nil, 500, 500)
	s.Offer(intentOf(1, 1, time.Hour, svc, group))
	testutil.Until(t, 20*time.Second, func() bool { return s.Status().Seq == 1 }, "the switch holds the intent")

	frame := []byte("a TCP SYN to the VIP, as the switch sent it")
	cookie := dataplane.MakeCookie(5, dataplane.NoIndex, dataplane.KindDispatch)
	for range 10 {
		s.PacketIn(ofswitch.PacketIn{InPort: 9, Cookie: cookie, TotalLen: uint16(len(frame)), Data: frame})
	}
	outs := conn.PacketOuts()
	if len(outs) != 10 {
		t.Fatalf("%d packet-outs for 10 new connections", len(outs))
	}
	per := map[uint32]int{}
	for _, o := range outs {
		if o.InPort != 9 || string(o.Frame) != string(frame) || len(o.Actions) != 2 {
			t.Fatalf("packet-out %+v: want the frame back from port 9 with two actions", o)
		}
		set, ok := o.Actions[0].(*ofp.ActionSetField)
		out, ok2 := o.Actions[1].(*ofp.ActionOutput)
		if !ok || !ok2 || out.Port != ofp.PortTable {
			t.Fatalf("actions %v: want set_field reg3, output:TABLE", o.Actions)
		}
		if set.Field.Class != ofp.XMClassNicira1 || set.Field.Type != 3 || len(set.Field.Value) != 4 {
			t.Fatalf("set_field %v is not reg3", set.Field)
		}
		per[uint32(set.Field.Value[3])]++ // reg3 = index + 1
	}
	if per[1] != 0 || per[2] != 6 || per[3] != 4 {
		t.Errorf("10 connections went %v by reg3 (index+1), want 6 to b and 4 to c by weight, none to a", per)
	}
	if n := counterValue(t, sent.WithLabelValues("web", "b", DispatchRoundRobin)); n != 6 {
		t.Errorf("dispatched{b, round_robin} = %v", n)
	}

	for _, pi := range []struct {
		reason string
		pi     ofswitch.PacketIn
	}{
		{DispatchNoService, ofswitch.PacketIn{InPort: 9, Cookie: dataplane.MakeCookie(6, dataplane.NoIndex, dataplane.KindDispatch), TotalLen: uint16(len(frame)), Data: frame}},
		{DispatchNoService, ofswitch.PacketIn{InPort: 9, Cookie: dataplane.MakeCookie(77, dataplane.NoIndex, dataplane.KindDispatch), TotalLen: uint16(len(frame)), Data: frame}},
		{DispatchTruncated, ofswitch.PacketIn{InPort: 9, Cookie: cookie, TotalLen: 1500, Data: frame}},
	} {
		s.PacketIn(pi.pi)
	}
	if n := len(conn.PacketOuts()); n != 10 {
		t.Errorf("%d packet-outs after three bad packet-ins, want still 10", n)
	}
	if n := counterValue(t, dropped.WithLabelValues("-", DispatchNoService)); n != 2 {
		t.Errorf("dropped{no_service} = %v, want 2 (a group service, an unknown index)", n)
	}
	if n := counterValue(t, dropped.WithLabelValues("web", DispatchTruncated)); n != 1 {
		t.Errorf("dropped{truncated} = %v, want 1", n)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
