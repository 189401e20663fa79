//go:build integration

package balancer

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"flowweight/controller/config"
)

// runBalancer starts a Balancer on cfg in this process, with its listeners on the addresses
// cfg names (127.0.0.1:0 in the tests), and returns it with the push listener's address. At
// cleanup it stops the balancer and fails the test if Run returned an error.
func runBalancer(t *testing.T, cfg *config.Config) (*Balancer, net.Addr) {
	t.Helper()
	b, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, func(_, push net.Addr) { ready <- push }) }()
	var push net.Addr
	select {
	case push = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("controller did not start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	return b, push
}
