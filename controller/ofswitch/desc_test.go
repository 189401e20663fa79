package ofswitch

import "testing"

// TestDescAtConnect: the session asks DESC once before Connected, and a switch whose answer
// is unusable still connects, as an unknown switch.
func TestDescAtConnect(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{}, h)
	f, sw := connectFake(t, srv, h, 0x51)
	if got := sw.Desc(); got.Software != "3.1.0" || got.Hardware != "Open vSwitch" {
		t.Errorf("Desc = %+v, want Open vSwitch 3.1.0", got)
	}
	if n := f.descRequests.Load(); n != 1 {
		t.Errorf("%d DESC requests, want 1", n)
	}

	f2 := newFake(t, 0x52)
	f2.descReply = []byte("short")
	f2.connect(srv.Addr())
	sw2 := h.wait(t, "connected").sw
	if got := sw2.Desc(); got != (Desc{}) {
		t.Errorf("Desc after a malformed reply = %+v, want empty", got)
	}
}
