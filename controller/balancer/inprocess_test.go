package balancer

import (
	"context"
	"net"
	"testing"
)

// startInProcess runs b in this process until stop (or the test's cleanup) and returns its
// OpenFlow and push listeners' addresses. stop ends Run and fails the test if it returned an
// error; calling it again does nothing.
func startInProcess(t *testing.T, b *Balancer) (of, push net.Addr, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	type addrs struct{ of, push net.Addr }
	ready := make(chan addrs, 1)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, func(of, push net.Addr) { ready <- addrs{of, push} }) }()
	select {
	case a := <-ready:
		of, push = a.of, a.push
	case err := <-done:
		cancel()
		t.Fatalf("controller did not start: %v", err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	}
	t.Cleanup(stop)
	return of, push, stop
}
