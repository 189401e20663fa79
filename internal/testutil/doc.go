// Package testutil holds what tests across the module share: waiting for a condition with a
// deadline (Eventually, Until), a fake clock (Clock), configuration fixtures from testdata/
// changed by a small builder (Fixture, Edit), and loopback services for checks to reach
// (TCPServer, Serve, UDPResponder), a directory that refuses writes even to root
// (Unwritable), and a buffer a logger on another goroutine may write (SyncBuffer). Before it, each package's tests had their own copy of
// each, with their own timeouts and failure messages.
//
// It is for _test.go files only, and like everything under internal/ it imports nothing of
// the products (internal/layers checks).
package testutil
