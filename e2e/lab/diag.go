package lab

import (
	"fmt"
	"io"
	"strings"
)

// SaveDiagnostics writes what a failed test needs to see: the bridge's flows
// and groups, ovs-vsctl show, the tail of ovs-vswitchd's log and of every
// process log, and the namespaces. Each section reports its own error, so
// one broken source does not hide the others. b may be nil.
func (l *Lab) SaveDiagnostics(b *Bridge, w io.Writer) {
	section := func(title, body string, err error) {
		fmt.Fprintf(w, "==== %s ====\n%s\n", title, strings.TrimRight(body, "\n"))
		if err != nil {
			fmt.Fprintf(w, "(error: %v)\n", err)
		}
	}
	if b != nil {
		out, err := b.DumpFlows()
		section("dump-flows "+b.Name, out, err)
		out, err = b.DumpGroups()
		section("dump-groups "+b.Name, out, err)
		out, err = b.Ofctl("show")
		section("show "+b.Name, out, err)
	}
	l.mu.Lock()
	o, procs := l.ovs, append([]*Proc(nil), l.procs...)
	l.mu.Unlock()
	if o != nil {
		out, err := o.Vsctl("show")
		section("ovs-vsctl show", out, err)
		section("ovs-vswitchd log (tail)", Tail(o.VswitchdLog(), 40), nil)
	}
	for _, p := range procs {
		section(fmt.Sprintf("%s pid %d log (tail)", p.Name, p.PID), Tail(p.LogPath, 20), nil)
	}
	out, err := l.run(nil, "ip", "netns", "list")
	section("ip netns list", out, err)
}
