package main

import (
	"errors"
	"net"
	"net/http"
	"testing"

	"flowweight/controller/api"
	"flowweight/controller/balancer"
	"flowweight/controller/config"

	"github.com/prometheus/client_golang/prometheus"
)

type oneService struct{}

func (oneService) Services() []balancer.ServiceView {
	return []balancer.ServiceView{{Name: "web", Total: 1000, Backends: []balancer.BackendView{{Name: "a", AppliedWeight: 1000, LastReportAge: 1}}}}
}
func (oneService) History() map[string][]balancer.Point { return nil }
func (oneService) Events() []balancer.Event             { return nil }
func (oneService) Drain(string, bool) bool              { return false }
func (oneService) Switches() []uint64                   { return nil }

// TestStatusThroughTheGuardedAPI: `controller status` passes the API's Host check, both
// with the IP:port form of its default -api and with localhost.
func TestStatusThroughTheGuardedAPI(t *testing.T) {
	srv, err := api.NewServer(oneService{}, prometheus.NewRegistry(), api.Options{Limits: api.LimitsFrom(config.Default().API)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, base := range []string{"http://" + ln.Addr().String(), "http://localhost:" + port} {
		if rc := statusCommand([]string{"-api", base}); rc != 0 {
			t.Fatalf("status -api %s: exit %d", base, rc)
		}
	}
}
