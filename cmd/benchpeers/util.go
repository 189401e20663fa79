package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"flowweight/collector/snmp"
)

// freePort prints a port on 127.0.0.1 that the kernel had free a moment ago.
// The caller's daemon may lose it to another process; the script then fails
// loudly when the daemon does not come up, rather than measuring something else.
func freePort(args []string) error {
	if len(args) != 1 {
		return errors.New("want one argument, tcp or udp")
	}
	switch args[0] {
	case "tcp":
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer l.Close()
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
	case "udp":
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer c.Close()
		fmt.Println(c.LocalAddr().(*net.UDPAddr).Port)
	default:
		return fmt.Errorf("protocol %q: want tcp or udp", args[0])
	}
	return nil
}

// sink is the probe's counterpart in the footprint run: a UDP socket that
// counts datagrams (the probe's reports; nothing is verified, the collector's
// cost is measured by cost) and an HTTP endpoint the probe health-checks. Its
// port is also the probe's service port. It writes "udpport httpport" to
// -ports once bound and the datagram count to -count on every datagram, and
// stops on SIGTERM or after -max.
func sink(args []string) error {
	fs := flag.NewFlagSet("sink", flag.ContinueOnError)
	portsFile := fs.String("ports", "", "file to write \"udpport httpport\" to")
	countFile := fs.String("count", "", "file holding the number of datagrams received")
	maxRun := fs.Duration("max", 10*time.Minute, "stop after this long at the latest")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *portsFile == "" || *countFile == "" {
		return errors.New("-ports and -count are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *maxRun)
	defer cancel()

	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer udp.Close()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	body := []byte("status: ready\n")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	ports := fmt.Sprintf("%d %d\n", udp.LocalAddr().(*net.UDPAddr).Port, ln.Addr().(*net.TCPAddr).Port)
	if err := os.WriteFile(*portsFile, []byte(ports), 0o644); err != nil {
		return err
	}
	var n atomic.Uint64
	go func() {
		<-ctx.Done()
		_ = udp.Close()
	}()
	buf := make([]byte, 2048)
	for {
		if _, _, err := udp.ReadFrom(buf); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("sink UDP socket: %w", err)
		}
		c := n.Add(1)
		if err := os.WriteFile(*countFile, []byte(strconv.FormatUint(c, 10)+"\n"), 0o644); err != nil {
			return err
		}
	}
}

// snmpTarget is the v2c target both load and cost poll: the same data the
// probe reports (CPU, memory, established connections on the service port).
func snmpTarget(addr, community string, servicePort int) snmp.Target {
	t := snmp.Target{Address: addr, Version: "v2c", Community: community, Timeout: time.Second, Retries: 1}
	if servicePort > 0 {
		t.ServicePorts = []uint16{uint16(servicePort)}
	}
	return t
}

// waitSNMP polls until the agent answers one whole poll, for at most limit:
// snmpd needs a moment after its start to bind and load its modules.
func waitSNMP(t snmp.Target, limit time.Duration) error {
	p, err := snmp.NewPoller(t)
	if err != nil {
		return err
	}
	defer p.Close()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := p.Poll(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("snmpd at %s did not answer within %v: %w", t.Address, limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cpuSelf is this process's user+system CPU time so far (getrusage
// RUSAGE_SELF: every thread, the Go runtime's included; children excluded).
func cpuSelf() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// procCPU is utime+stime of another process from /proc/PID/stat, in clock
// ticks of 1/100 s (USER_HZ on Linux).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	ticks, err := parseStatTicks(string(b))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// parseStatTicks returns utime+stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name in parentheses may hold spaces and ")", so fields
// are counted from the last ")".
func parseStatTicks(line string) (uint64, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, errors.New("no \")\" after the command name")
	}
	f := strings.Fields(line[i+1:])
	// After ")": state is field 3, so utime (14) is f[11] and stime (15) f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	u, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime %q: %w", f[11], err)
	}
	s, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime %q: %w", f[12], err)
	}
	return u + s, nil
}

// parseCounts parses "1,10,50" into positive backend counts.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n > 1000 {
			return nil, fmt.Errorf("backend count %q: want an integer in 1..1000", f)
		}
		out = append(out, n)
	}
	return out, nil
}
