// Command probe runs on each backend server: it measures the backend's load and the health of
// its service and pushes one authenticated report per interval to the flowweight collector.
// See docs/probe.md.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
