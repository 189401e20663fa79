package lab_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"

	"flowweight/e2e/lab"
)

// A demo: a switch that waits for the controller, a client and one
// CPU-limited backend; Close (or, after a crash, Sweep) removes it all.
func Example() {
	l, err := lab.New(os.TempDir()+"/fwdemo", os.Stderr)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	o, err := l.StartOVS()
	if err != nil {
		fmt.Println(err)
		return
	}
	br, err := o.AddBridge("br0", "tcp:127.0.0.1:6653", "secure")
	if err != nil {
		fmt.Println(err)
		return
	}
	be, err := br.AddHost("be1", netip.MustParsePrefix("10.77.0.11/24"))
	if err != nil {
		fmt.Println(err)
		return
	}
	cg, err := l.NewCgroup("be1", 0.5)
	if err != nil {
		fmt.Println(err)
		return
	}
	cmd := be.Command(context.Background(), "backendd", "-listen", "10.77.0.11:8080", "-name", "be1")
	if _, err := l.Start("be1", cmd, cg); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("backend on port", be.OFPort, "probe reads", cg.Path())
}
