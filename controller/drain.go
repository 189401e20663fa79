package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"flowweight/controller/config"
	"flowweight/controller/view"
)

const drainUsage = `usage: controller drain [-api URL] [-config FILE | -token-file FILE] [-wait [-timeout D]] BACKEND
       controller undrain [-api URL] [-config FILE | -token-file FILE] BACKEND

drain sets the operator drain of BACKEND through the running controller's API: its weight goes
to 0 on every switch at the next update, and established connections stay where they are
(conntrack mode). undrain clears it. With -wait, drain then polls
GET /api/v1/backends/BACKEND/drained and prints the backend's connection count as it falls,
until the backend is safe to stop: weight 0 confirmed on every connected switch holding its
services, and its latest connection count 0 and not older than the collector's stale_after.

The bearer token is read from -token-file, or else from the api.token_file of -config.

Exit status: 0 done (with -wait: safe to stop); 1 an error, or -timeout passed first (the
message says what still holds the backend); 2 a usage error; 130 interrupted. Since a probe
may report a count up to its conns_interval old, the 0 it trusts must be reported at least
-settle after weight 0 reached every switch.

Flags:
`

// exitInterrupted is the shell's status for a command ended by SIGINT.
const exitInterrupted = 130

// drainFlags are drain's and undrain's command line.
type drainFlags struct {
	api, cfgPath, tokenFile string
	cfgSet                  bool // -config was given, so it must be readable
	help                    bool // -h: usage asked for, not a usage error
	wait                    bool
	timeout, interval       time.Duration
	settle                  time.Duration
	name                    string
}

// parseDrainFlags parses args; a usage error is printed and returns false.
func parseDrainFlags(verb string, args []string, stderr io.Writer) (drainFlags, bool) {
	var f drainFlags
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.api, "api", "http://127.0.0.1:9090", "the controller's API address")
	fs.StringVar(&f.cfgPath, "config", "/etc/flowweight/controller.toml", "configuration file, for api.token_file")
	fs.StringVar(&f.tokenFile, "token-file", "", "the API's bearer token file (default: api.token_file of -config)")
	if verb == "drain" {
		fs.BoolVar(&f.wait, "wait", false, "wait until the backend is safe to stop")
		fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "with -wait: give up after this long (exit 1)")
		fs.DurationVar(&f.interval, "interval", time.Second, "with -wait: how often to ask the API")
		fs.DurationVar(&f.settle, "settle", 5*time.Second, "with -wait: trust only a count reported this long after weight 0 reached every switch (at least the probes' conns_interval, 5s by default)")
	}
	fs.Usage = func() { fmt.Fprint(fs.Output(), drainUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		f.help = errors.Is(err, flag.ErrHelp)
		return f, false
	}
	fs.Visit(func(fl *flag.Flag) { f.cfgSet = f.cfgSet || fl.Name == "config" })
	switch {
	case fs.NArg() != 1:
		fmt.Fprintf(stderr, "%s: want exactly one backend name, got %d arguments\n", verb, fs.NArg())
	case !config.ValidName(fs.Arg(0)):
		fmt.Fprintf(stderr, "%s: %q is not a backend name (1-64 characters of A-Z a-z 0-9 . _ -)\n", verb, fs.Arg(0))
	case f.wait && (f.timeout <= 0 || f.interval <= 0 || f.settle < 0):
		fmt.Fprintf(stderr, "%s: -timeout (%v) and -interval (%v) must be positive, -settle (%v) not negative\n", verb, f.timeout, f.interval, f.settle)
	case !strings.HasPrefix(f.api, "http://") && !strings.HasPrefix(f.api, "https://"):
		fmt.Fprintf(stderr, "%s: -api %q: want http://HOST:PORT or https://HOST:PORT\n", verb, f.api)
	default:
		f.name = fs.Arg(0)
		f.api = strings.TrimRight(f.api, "/")
		return f, true
	}
	fs.Usage()
	return f, false
}

// apiToken is the bearer token to send ("" for none) and where it came from, for messages.
// -token-file must be readable; -config must be readable when given, and the token file it
// names must be; the default configuration missing only means no token.
func (f drainFlags) apiToken() (token, from string, err error) {
	if f.tokenFile != "" {
		tok, err := config.ReadToken(f.tokenFile)
		if err != nil {
			return "", "", fmt.Errorf("-token-file: %w", err)
		}
		return tok.Reveal(), f.tokenFile, nil
	}
	data, err := config.ReadFile(f.cfgPath)
	if err != nil {
		if !f.cfgSet && errors.Is(err, os.ErrNotExist) {
			return "", fmt.Sprintf("no token: %s does not exist; give -config or -token-file", f.cfgPath), nil
		}
		return "", "", err
	}
	cfg, err := config.Parse(f.cfgPath, data)
	if err != nil {
		return "", "", err
	}
	if cfg.API.TokenFile == "" {
		return "", fmt.Sprintf("no token: %s sets no api.token_file", f.cfgPath), nil
	}
	tok, err := config.ReadToken(cfg.API.TokenFile)
	if err != nil {
		return "", "", fmt.Errorf("api.token_file of %s: %w", f.cfgPath, err)
	}
	return tok.Reveal(), cfg.API.TokenFile, nil
}

// drainCommand is `controller drain` (drained true) and `controller undrain`.
func drainCommand(ctx context.Context, args []string, drained bool, stdout, stderr io.Writer) int {
	verb := "undrain"
	if drained {
		verb = "drain"
	}
	f, ok := parseDrainFlags(verb, args, stderr)
	if !ok {
		if f.help {
			return 0
		}
		return 2
	}
	token, from, err := f.apiToken()
	if err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", verb, f.name, err)
		return 1
	}
	c := &http.Client{Timeout: 5 * time.Second}
	if err := postDrain(ctx, c, f, verb, token, from); err != nil {
		fmt.Fprintf(stderr, "%s %s: %v\n", verb, f.name, err)
		return 1
	}
	if !f.wait {
		if drained {
			fmt.Fprintf(stdout, "%s: drained: weight 0 from the next update; `controller drain -wait %s` says when it is safe to stop\n", f.name, f.name)
		} else {
			fmt.Fprintf(stdout, "%s: undrained: it gets weight again from the next update\n", f.name)
		}
		return 0
	}
	fmt.Fprintf(stdout, "%s: drained; waiting up to %v until it is safe to stop\n", f.name, f.timeout)
	return waitDrained(ctx, c, f, stdout, stderr)
}

// postDrain asks the API for the drain or undrain; its errors name the backend's fate, the
// token's source or the API's own answer.
func postDrain(ctx context.Context, c *http.Client, f drainFlags, verb, token, from string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.api+"/api/v1/backends/"+url.PathEscape(f.name)+"/"+verb, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("the API at %s: %w", f.api, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	msg := strings.TrimSpace(string(body))
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusUnauthorized && token == "":
		return fmt.Errorf("the API wants a bearer token (%s): %s", from, msg)
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("the API refused the token from %s: %s", from, msg)
	default:
		return fmt.Errorf("the API answered %s: %s", resp.Status, msg)
	}
}

// waitDrained polls the drained endpoint until the backend is safe to stop (0), -timeout
// passes (1) or ctx ends (130), printing a line whenever the count or a switch's
// confirmation changes.
//
// Safe by the API is not enough on its own: a probe reuses its connection count for
// conns_interval (snmpd its table for about 5 s), so a 0 reported soon after the switches took
// weight 0 may have been counted before a last connection arrived. The command also wants the
// count it trusts to have been reported at least -settle after the first answer that showed
// weight 0 confirmed on every switch; the API checks the same against the drain's own time,
// which is earlier when a switch confirmed late (it was disconnected, a standby took over).
func waitDrained(ctx context.Context, c *http.Client, f drainFlags, stdout, stderr io.Writer) int {
	start := time.Now()
	deadline := time.NewTimer(f.timeout)
	defer deadline.Stop()
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	last, lastErr := "", ""
	reason := "no answer from the API yet"
	var onSwitches time.Time // first answer with weight 0 confirmed everywhere; zero while not
	told := false            // the wait for a later count was announced
	for {
		v, err := getDrained(ctx, c, f)
		now := time.Now()
		switch {
		case errors.Is(err, view.ErrNoBackend):
			fmt.Fprintf(stderr, "drain %s: %v (removed by a reload?)\n", f.name, err)
			return 1
		case err != nil && ctx.Err() == nil:
			if err.Error() != lastErr {
				fmt.Fprintf(stderr, "drain %s: asking whether it is drained: %v (still trying)\n", f.name, err)
			}
			lastErr, reason = err.Error(), err.Error()
		case err == nil:
			lastErr, reason = "", v.Reason
			if key := progressKey(v); key != last {
				last = key
				fmt.Fprintf(stdout, "%7.1fs  %s\n", now.Sub(start).Seconds(), progressLine(v))
			}
			if !weightConfirmed(v) {
				onSwitches = time.Time{}
			} else if onSwitches.IsZero() {
				onSwitches = now
			}
			if !v.Safe || v.ConnectionsAge == nil {
				told = false
				break
			}
			counted := now.Add(-time.Duration(*v.ConnectionsAge * float64(time.Second)))
			if !counted.Before(onSwitches.Add(f.settle)) {
				fmt.Fprintf(stdout, "%s: safe to stop\n", f.name)
				return 0
			}
			reason = fmt.Sprintf("0 connections, but no count reported %v after weight 0 reached every switch yet", f.settle)
			if !told {
				told = true
				fmt.Fprintf(stdout, "%7.1fs  %s: safe by the API; waiting for a count reported %v after weight 0 reached every switch (a probe may report a count up to its conns_interval old)\n",
					now.Sub(start).Seconds(), f.name, f.settle)
			}
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "drain %s: interrupted; it stays drained, not yet safe to stop: %s\n", f.name, reason)
			return exitInterrupted
		case <-deadline.C:
			fmt.Fprintf(stderr, "drain %s: not safe to stop after %v: %s\n", f.name, f.timeout, reason)
			return 1
		case <-tick.C:
		}
	}
}

// weightConfirmed: nothing but connections holds the backend (drained, weight 0 in the latest
// update and confirmed on every switch that holds its services).
func weightConfirmed(v view.DrainedView) bool {
	for _, h := range v.Holding {
		if h.Kind != "connections" {
			return false
		}
	}
	return v.OperatorDrained
}

// getDrained reads the drained endpoint: its view on 200 and 503, ErrNoBackend on 404.
func getDrained(ctx context.Context, c *http.Client, f drainFlags) (view.DrainedView, error) {
	var v view.DrainedView
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.api+"/api/v1/backends/"+url.PathEscape(f.name)+"/drained", nil)
	if err != nil {
		return v, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return v, err
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusServiceUnavailable:
		if err := json.Unmarshal(body, &v); err != nil || v.Backend != f.name {
			return v, fmt.Errorf("%s: not a drained view: %.200q", resp.Status, body)
		}
		return v, nil
	case http.StatusNotFound:
		return v, fmt.Errorf("%w: %s", view.ErrNoBackend, strings.TrimSpace(string(body)))
	default:
		return v, fmt.Errorf("%s: %.200s", resp.Status, strings.TrimSpace(string(body)))
	}
}

// progressKey is what a new progress line is printed for: the count and its source, and
// which switches confirmed weight 0 (not the ages, which change at every poll).
func progressKey(v view.DrainedView) string {
	var b strings.Builder
	if v.Connections != nil {
		fmt.Fprintf(&b, "%.0f/%s", *v.Connections, v.ConnectionsSource)
	}
	for _, s := range v.Switches {
		fmt.Fprintf(&b, " %s=%v", s.DPID, s.WeightZero)
	}
	for _, h := range v.Holding {
		if h.Kind != "connections" {
			b.WriteString(" " + h.Kind)
		}
	}
	return b.String()
}

// progressLine is one line of the wait: "50 connections (probe, 0.4s old); weight 0 on 1 of
// 1 switches", then what else holds the backend.
func progressLine(v view.DrainedView) string {
	conns := "no connection count yet"
	if v.Connections != nil {
		conns = fmt.Sprintf("%.0f connections (%s, %.1fs old)", *v.Connections, v.ConnectionsSource, *v.ConnectionsAge)
	}
	zero := 0
	for _, s := range v.Switches {
		if s.WeightZero {
			zero++
		}
	}
	line := fmt.Sprintf("%s: %s; weight 0 on %d of %d switches", v.Backend, conns, zero, len(v.Switches))
	var other []string
	for _, h := range v.Holding {
		if h.Kind != "connections" {
			other = append(other, h.Text)
		}
	}
	if len(other) > 0 {
		line += "; " + strings.Join(other, "; ")
	}
	return line
}
