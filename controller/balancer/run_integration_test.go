//go:build integration

package balancer

import (
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
	_, push, _ := startInProcess(t, b)
	return b, push
}
