package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"flowweight/e2e/lab"
	"flowweight/e2e/scenario"
)

// labNet is the third octet of the lab's 10.77.N.0/24 (the end-to-end tests use others, so a
// leftover of one never answers for the other).
const labNet = 7

// work is backendd's SHA-256 rounds per request: enough that a request costs CPU and the
// backends' quotas, not the switch, limit throughput.
const work = 60000

func serveCommand(args []string) int {
	fs := flag.NewFlagSet(supervisorVerb, flag.ExitOnError)
	stateDir := fs.String("state", DefaultStateDir, "state directory")
	dir := fs.String("dir", "", "lab directory (binaries in DIR/bin)")
	id := fs.String("id", "", "lab id")
	_ = fs.Parse(args)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := checkLabDir(*dir); err != nil || !idPattern.MatchString(*id) {
		log.Error("bad arguments", "dir", *dir, "id", *id, "err", err)
		return 2
	}
	// SIGTERM (from `down`) ends the lab; SIGHUP must not, should a terminal ever reach us.
	signal.Ignore(syscall.SIGHUP)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	storyf, err := os.OpenFile(filepath.Join(*stateDir, storyLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		log.Error("story log", "err", err)
		return 1
	}
	defer storyf.Close()
	st := newStory(storyf)

	bins := filepath.Join(*dir, "bin")
	opts := scenario.Options{
		Dir: *dir, ID: *id, Net: labNet, Work: work, Log: os.Stderr,
		Bins: scenario.Binaries{Controller: filepath.Join(bins, "controller"), Probe: filepath.Join(bins, "probe"),
			Backendd: filepath.Join(bins, "backendd")},
	}
	st.say("starting the lab %s in %s (Open vSwitch, 5 namespaces, 3 cgroups, controller, probes); waits for the host lock %s if another lab's switch runs", "fw"+*id, *dir, lab.LockPath)
	t0 := time.Now()
	started := make(chan struct{})
	var s *scenario.Scenario
	go func() {
		defer close(started)
		s, err = scenario.Start(opts)
	}()
	select {
	case <-started:
	case <-ctx.Done():
		// Start cannot be interrupted; let it finish, then tear down what it built.
		log.Info("stop requested while starting; waiting for the start to finish")
		<-started
	}
	if err != nil {
		log.Error("lab failed to start", "err", err)
		st.say("the lab failed to start; what was built is torn down again:")
		st.block(err.Error())
		st.line(storyFailed)
		return 1
	}
	log.Info("lab started", "prefix", s.Lab.Prefix, "elapsed", time.Since(t0).Round(time.Millisecond).String())
	defer func() {
		log.Info("tearing the lab down")
		if err := s.Close(); err != nil {
			log.Error("teardown", "err", err)
		} else {
			log.Info("lab closed")
		}
	}()
	if want := filepath.Join(*dir, "ovs", "fw"+*id+"-br.mgmt"); s.Bridge.Mgmt() != want {
		log.Warn("bridge management socket differs from the state file", "mgmt", s.Bridge.Mgmt(), "state", want)
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	proxyErr := make(chan error, 1)
	wg.Go(func() { proxyErr <- forward(pctx, ProxyAddr, s.Ctl, scenario.APIAddr, log) })
	if ctx.Err() == nil {
		st.run(ctx, s, time.Since(t0), proxyErr)
	}
	<-ctx.Done()
	log.Info("stop requested")
	pcancel()
	return 0
}

// forward accepts on addr in the root namespace (loopback only) and connects each client to
// target inside host's namespace, so a browser on this machine reaches the dashboard
// without entering the namespace. It returns when ctx ends, or at once if addr is taken.
func forward(ctx context.Context, addr string, host *lab.Host, target string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("dashboard forwarder: %w", err)
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			log.Warn("dashboard forwarder: accept", "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		wg.Go(func() {
			defer c.Close()
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			up, err := host.DialContext(dctx, "tcp", target)
			cancel()
			if err != nil {
				log.Warn("dashboard forwarder: dial", "target", target, "err", err)
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				done <- struct{}{}
			}
			go pipe(up, c)
			go pipe(c, up)
			select {
			case <-done:
				<-done
			case <-ctx.Done():
			}
		})
	}
}
