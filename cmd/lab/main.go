// Command lab runs flowweight's one-command lab demo (scripts/lab.sh is its front end).
//
//	lab up     -state DIR -dir LABDIR   start the supervisor detached, tell the story live
//	lab serve  -state DIR -dir LABDIR -id ID   (the supervisor; started by up)
//	lab status -state DIR               what runs, dump-groups, the controller's table
//	lab down   -state DIR               stop the supervisor, sweep leftovers, remove the state
//
// The supervisor holds an e2e/scenario (Open vSwitch, a client, three CPU-limited backends
// with backendd and the probe, the controller in its own namespace) until SIGTERM, and
// writes the story — what was built, the group as dump-groups prints it, load through the
// VIP, a CPU burner, a stopped and restarted backend — to DIR/story.log, which `up` prints
// as it grows. It runs detached (its own session, cwd /) so it outlives `up`.
//
// Everything it touches is the lab's own: processes by the PIDs it started or recorded,
// names by the lab's prefix. The controller's API stays inside the lab's "ctl" namespace;
// the supervisor forwards one loopback port of the root namespace to it for the dashboard.
package main

import (
	"fmt"
	"os"
)

const usage = `usage: lab up|status|down -state DIR [flags]
       lab serve -state DIR -dir LABDIR -id ID   (started by up)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var code int
	switch os.Args[1] {
	case "up":
		code = upCommand(os.Args[2:])
	case supervisorVerb:
		code = serveCommand(os.Args[2:])
	case "status":
		code = statusCommand(os.Args[2:])
	case "down":
		code = downCommand(os.Args[2:])
	default:
		fmt.Fprint(os.Stderr, usage)
		code = 2
	}
	os.Exit(code)
}
