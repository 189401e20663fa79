// Command benchpeers is the helper of scripts/bench-peers.sh: it holds the
// parts of the peer benchmark that a shell script cannot do well.
//
//	benchpeers freeport tcp|udp          print a free port on 127.0.0.1
//	benchpeers sink -ports F -count F    UDP datagram counter + HTTP health endpoint
//	benchpeers load ...                  scrape node-exporters and poll snmpd once per interval
//	benchpeers cost ...                  collector CPU per backend per update: SNMP poll vs push
//	benchpeers pushsend ...              (child of cost) N simulated probes pushing sealed reports
//
// It is a benchmark driver, not part of the product: every loop is bounded in
// count and time, it talks to 127.0.0.1 only, and it starts no daemon (the
// script starts snmpd and the exporters and kills them by PID).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "freeport":
		err = freePort(os.Args[2:])
	case "sink":
		err = sink(os.Args[2:])
	case "load":
		err = load(os.Args[2:])
	case "cost":
		err = cost(os.Args[2:])
	case "pushsend":
		err = pushSend(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchpeers %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: benchpeers freeport|sink|load|cost|pushsend [flags]")
	os.Exit(2)
}
