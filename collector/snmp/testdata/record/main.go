// Command record captures the varbinds a real snmpd returns for the
// Poller's three requests and writes them as JSON fixtures for the unit
// tests (see ../../fixture_test.go for the format). It lives under testdata
// so that `go test ./...` and `go vet ./...` never build it. Run it as
//
//	go run ./collector/snmp/testdata/record -addr 127.0.0.1:16199 -community fwtest -prefix warm
//
// It opens -conns established loopback TCP connections to a listener of its
// own while walking tcpConnTable, and records that listener's port in the
// fixture so tests can count on it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gosnmp/gosnmp"
)

type pdu struct {
	OID   string `json:"oid"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

type fixture struct {
	Comment        string `json:"comment"`
	Request        string `json:"request"`
	ListenPort     uint16 `json:"listen_port,omitempty"`
	ListenPortDual uint16 `json:"listen_port_dual,omitempty"`
	Conns          int    `json:"conns,omitempty"`
	PDUs           []pdu  `json:"pdus"`
}

var scalarOIDs = []string{
	".1.3.6.1.2.1.1.3.0",
	".1.3.6.1.4.1.2021.11.50.0", ".1.3.6.1.4.1.2021.11.51.0", ".1.3.6.1.4.1.2021.11.52.0", ".1.3.6.1.4.1.2021.11.53.0",
	".1.3.6.1.4.1.2021.11.54.0", ".1.3.6.1.4.1.2021.11.56.0", ".1.3.6.1.4.1.2021.11.61.0", ".1.3.6.1.4.1.2021.11.64.0",
	".1.3.6.1.4.1.2021.4.5.0", ".1.3.6.1.4.1.2021.4.6.0", ".1.3.6.1.4.1.2021.4.14.0", ".1.3.6.1.4.1.2021.4.15.0",
	".1.3.6.1.2.1.6.9.0",
}

func convert(in []gosnmp.SnmpPDU) []pdu {
	out := make([]pdu, 0, len(in))
	for _, p := range in {
		out = append(out, pdu{OID: p.Name, Type: p.Type.String(), Value: p.Value})
	}
	return out
}

func write(dir, name string, f fixture) {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:16199", "agent host:port")
	community := flag.String("community", "fwtest", "v2c community")
	prefix := flag.String("prefix", "warm", "fixture file name prefix")
	dir := flag.String("dir", "collector/snmp/testdata", "output directory")
	conns := flag.Int("conns", 3, "established loopback connections to hold open during the tcpConnTable walk")
	withTCP := flag.Bool("tcp", true, "also record the TCP connection tables")
	comment := flag.String("comment", "", "what state the agent was in")
	flag.Parse()

	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		log.Fatal(err)
	}
	pn, _ := strconv.Atoi(port)
	g := &gosnmp.GoSNMP{Target: host, Port: uint16(pn), Community: *community, Version: gosnmp.Version2c,
		Timeout: 2 * time.Second, Retries: 1, MaxRepetitions: 50}
	if err := g.Connect(); err != nil {
		log.Fatal(err)
	}
	defer g.Close()

	stamp := time.Now().UTC().Format(time.RFC3339) + " " + *comment
	pkt, err := g.Get(scalarOIDs)
	if err != nil {
		log.Fatal(err)
	}
	write(*dir, *prefix+"_scalars.json", fixture{Comment: stamp, Request: "get", PDUs: convert(pkt.Variables)})

	hr, err := g.BulkWalkAll(".1.3.6.1.2.1.25.3.3.1")
	if err != nil {
		log.Fatal(err)
	}
	write(*dir, *prefix+"_hrprocessor.json", fixture{Comment: stamp, Request: "walk .1.3.6.1.2.1.25.3.3.1", PDUs: convert(hr)})

	if !*withTCP {
		fmt.Println("recorded", *prefix)
		return
	}
	// Two listeners with -conns connections each: an IPv4 socket, and a
	// dual-stack one (Go's default for ":port"), whose accepted
	// connections are IPv4-mapped IPv6 sockets.
	lp := listen(tb4, *conns)
	lpDual := listen(tbDual, *conns)

	// net-snmp caches tcpConnTable for a few seconds and tcpConnectionTable
	// for up to a minute: walk until both listeners show up, at most 90
	// times.
	var tcp, tcpx []gosnmp.SnmpPDU
	for try := 0; ; try++ {
		tcp, err = g.BulkWalkAll(".1.3.6.1.2.1.6.13.1.1")
		if err != nil {
			log.Fatal(err)
		}
		tcpx, err = g.BulkWalkAll(".1.3.6.1.2.1.6.19.1.7")
		if err != nil {
			log.Fatal(err)
		}
		if hasPort(tcp, fmt.Sprintf(".127.0.0.1.%d.", lp)) &&
			hasPort(tcpx, fmt.Sprintf(".255.255.127.0.0.1.%d.", lpDual)) {
			break
		}
		if try == 90 {
			log.Fatalf("listener ports %d, %d never appeared in the TCP tables", lp, lpDual)
		}
		time.Sleep(time.Second)
	}
	write(*dir, *prefix+"_tcpconn.json", fixture{Comment: stamp, Request: "walk .1.3.6.1.2.1.6.13.1.1",
		ListenPort: lp, ListenPortDual: lpDual, Conns: *conns, PDUs: convert(tcp)})
	write(*dir, *prefix+"_tcpconnection.json", fixture{Comment: stamp, Request: "walk .1.3.6.1.2.1.6.19.1.7",
		ListenPort: lp, ListenPortDual: lpDual, Conns: *conns, PDUs: convert(tcpx)})
	fmt.Println("recorded", *prefix, "listen ports", lp, lpDual)
}

const (
	tb4    = "tcp4"
	tbDual = "tcp"
)

// listen opens a loopback listener (network "tcp4" on 127.0.0.1, or "tcp"
// on ":0" for a dual-stack socket) and n connections to it over IPv4. The
// sockets stay open until the process exits.
func listen(network string, n int) uint16 {
	addr := "127.0.0.1:0"
	if network == tbDual {
		addr = ":0"
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		var held []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	for i := 0; i < n; i++ {
		if _, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port)); err != nil {
			log.Fatal(err)
		}
	}
	return port
}

func hasPort(pdus []gosnmp.SnmpPDU, needle string) bool {
	for _, p := range pdus {
		if strings.Contains(p.Name, needle) {
			return true
		}
	}
	return false
}
