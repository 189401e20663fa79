package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"flowweight/collector/snmp"
)

// loadCount is what one load target saw.
type loadCount struct {
	name     string
	ok, fail int
	bytes    int64
	firstErr error
}

func (c *loadCount) record(n int64, err error) {
	if err != nil {
		c.fail++
		if c.firstErr == nil {
			c.firstErr = err
		}
		return
	}
	c.ok++
	c.bytes += n
}

// load makes the peers do the work the probe does: once per -interval it
// scrapes every -scrape URL (a whole /metrics page, as Prometheus would, over
// a keep-alive connection) and polls the snmpd at -snmp once with the
// collector's own SNMP poller. It stops after -duration or on SIGTERM, at most
// duration/interval+1 rounds, and prints what it counted.
func load(args []string) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	interval := fs.Duration("interval", time.Second, "time between rounds")
	duration := fs.Duration("duration", 70*time.Second, "total run time")
	scrape := fs.String("scrape", "", "comma-separated URLs to GET each round")
	addr := fs.String("snmp", "", "snmpd address host:port to poll each round (empty: none)")
	community := fs.String("community", "", "v2c community of -snmp")
	port := fs.Int("service-port", 0, "TCP port whose established connections the poll counts (0: tcpCurrEstab)")
	out := fs.String("out", "", "file for the counts (default stdout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *interval <= 0 || *duration <= 0 {
		return errors.New("-interval and -duration must be > 0")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()

	var urls []string
	if *scrape != "" {
		urls = strings.Split(*scrape, ",")
	}
	counts := make([]*loadCount, len(urls))
	for i, u := range urls {
		counts[i] = &loadCount{name: "scrape " + u}
	}
	client := &http.Client{Timeout: *interval}
	var poller *snmp.Poller
	var polls *loadCount
	if *addr != "" {
		t := snmpTarget(*addr, *community, *port)
		if err := waitSNMP(t, 10*time.Second); err != nil {
			return err
		}
		p, err := snmp.NewPoller(t)
		if err != nil {
			return err
		}
		defer p.Close()
		poller, polls = p, &loadCount{name: "snmp poll " + *addr}
	}

	rounds := int(*duration / *interval) + 1
	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for r := 0; r < rounds; r++ {
		for i, u := range urls {
			counts[i].record(get(ctx, client, u))
		}
		if poller != nil {
			pctx, pcancel := context.WithTimeout(ctx, *interval)
			_, err := poller.Poll(pctx)
			pcancel()
			polls.record(0, err)
		}
		select {
		case <-ctx.Done():
			r = rounds
		case <-tick.C:
		}
	}

	w := os.Stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	if polls != nil {
		counts = append(counts, polls)
	}
	for _, c := range counts {
		fmt.Fprintf(w, "%s: %d ok, %d failed, %d bytes", c.name, c.ok, c.fail, c.bytes)
		if c.firstErr != nil && !errors.Is(c.firstErr, context.Canceled) {
			fmt.Fprintf(w, " (first error: %v)", c.firstErr)
		}
		fmt.Fprintln(w)
	}
	return nil
}

// get fetches url and reads the whole body; a non-200 answer is an error.
func get(ctx context.Context, c *http.Client, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return n, fmt.Errorf("GET %s: body: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return n, fmt.Errorf("GET %s: status %s", url, resp.Status)
	}
	return n, nil
}
