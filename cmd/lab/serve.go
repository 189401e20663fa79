package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
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

// forward serves, on addr in the root namespace (loopback only), the controller's dashboard
// and API from target inside host's namespace, so a browser on this machine reaches them
// without entering the namespace. It returns when ctx ends, or at once if addr is taken.
func forward(ctx context.Context, addr string, host *lab.Host, target string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("dashboard forwarder: %w", err)
	}
	srv := &http.Server{Handler: dashboardProxy(target, host.NS, host.DialContext, log), ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("dashboard forwarder: %w", err)
	}
	return nil
}

// dashboardProxy passes GET and HEAD requests to the API at target in namespace ns, reached
// through dial, and refuses every other method. The controller trusts loopback callers (no
// token on its loopback listener); inside the lab's namespace only the supervisor is such a
// caller, but a plain forwarder would make every local user of the machine one, able to
// drain backends. Reading the dashboard needs nothing else.
func dashboardProxy(target, ns string, dial func(ctx context.Context, network, addr string) (net.Conn, error), log *slog.Logger) http.Handler {
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: target})
		},
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dial(ctx, network, target)
			},
			MaxIdleConns: 4, IdleConnTimeout: 30 * time.Second, ResponseHeaderTimeout: 10 * time.Second,
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("dashboard forwarder", "path", r.URL.Path, "err", err)
			http.Error(w, "the lab's controller API did not answer: "+err.Error(), http.StatusBadGateway)
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the lab's dashboard forwarder is read-only; drain from inside the namespace: "+
				"ip netns exec "+ns+" curl -X POST http://"+target+"/api/v1/backends/NAME/drain", http.StatusMethodNotAllowed)
			return
		}
		proxy.ServeHTTP(w, r)
	})
}
