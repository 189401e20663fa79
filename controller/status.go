package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"flowweight/controller/switchsync"
	"flowweight/controller/view"
)

// statusCommand prints the API's view of every service as a table, for operators in a
// terminal (the dashboard shows the same numbers).
func statusCommand(args []string) int {
	fs := flag.NewFlagSet("status", flag.ExitOnError)
	base := fs.String("api", "http://127.0.0.1:9090", "the controller's API address")
	_ = fs.Parse(args)
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(*base + "/api/v1/services")
	if err != nil {
		fmt.Fprintln(os.Stderr, "status:", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		fmt.Fprintf(os.Stderr, "status: %s: %s\n", resp.Status, body)
		return 1
	}
	var services []view.ServiceView
	if err := json.NewDecoder(resp.Body).Decode(&services); err != nil {
		fmt.Fprintln(os.Stderr, "status: decoding the API's answer:", err)
		return 1
	}
	if v, err := fetchHA(c, *base); err != nil {
		fmt.Fprintln(os.Stderr, "status: election:", err)
	} else {
		printHA(os.Stdout, v)
	}
	printStatus(os.Stdout, services)
	return 0
}

func fetchHA(c *http.Client, base string) (view.HAView, error) {
	var v view.HAView
	resp, err := c.Get(base + "/api/v1/ha")
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("%s", resp.Status)
	}
	return v, json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v)
}

// printHA says which controller leads and since which term; nothing without HA.
func printHA(w io.Writer, v view.HAView) {
	if !v.Enabled {
		return
	}
	leader := v.Leader
	if leader == "" {
		leader = "none known"
	}
	line := fmt.Sprintf("controller %s  leader=%s term=%d", v.Role, leader, v.Term)
	if v.Role == "leader" {
		line += fmt.Sprintf(" lease=%.1fs/%.0fs", v.LeaseRemaining, v.LeaseTTL)
	}
	if v.Error != "" {
		line += "  NOT CAMPAIGNING: " + v.Error
	}
	fmt.Fprintln(w, line)
	for _, dpid := range slices.Sorted(maps.Keys(v.Switches)) {
		fmt.Fprintf(w, "  switch %s: %s\n", dpid, v.Switches[dpid])
	}
}

func printStatus(w io.Writer, services []view.ServiceView) {
	shadows := slices.ContainsFunc(services, func(s view.ServiceView) bool { return s.ShadowPolicy != "" })
	for _, s := range services {
		panic := ""
		if s.Panic {
			panic = "  PANIC: no live backend, serving evenly"
		}
		slots := "slots=none (no switch)"
		if s.SlotTable > 0 {
			slots = fmt.Sprintf("slots=%d", s.SlotTable)
		} else if s.SlotFallback {
			slots = "slots=fallback (not proportional)"
		}
		switch s.UDPHash {
		case "per_flow":
			slots += " udp=per-flow"
		case "per_address":
			slots += " udp=per-address"
		}
		fmt.Fprintf(w, "service %s  %s  mode=%s group=%d policy=%s %s%s\n", s.Name, net.JoinHostPort(s.VIP, strconv.Itoa(s.Port)), s.Mode, s.GroupID, s.Policy, slots, panic)
		if s.PolicyFallback != "" {
			fmt.Fprintf(w, "  policy fallback: %s\n", s.PolicyFallback)
		}
		if s.Dispatch == "reactive" {
			fmt.Fprintf(w, "  dispatch: reactive (the controller chooses each new connection's backend by least connections; IN FLIGHT is its estimate, SENT what it sent)\n")
		}
		if s.ShadowPolicy != "" && len(s.CanaryDatapaths) > 0 {
			fmt.Fprintf(w, "  shadow policy: %s (computed beside the live weights; applied as a canary on %s only)\n", s.ShadowPolicy, strings.Join(s.CanaryDatapaths, ", "))
		} else if s.ShadowPolicy != "" {
			fmt.Fprintf(w, "  shadow policy: %s (computed beside the live weights, never applied)\n", s.ShadowPolicy)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		header := "BACKEND\tSTATE\tCPU\tOWN CPU\tMEM\tCONNS\tLIVE CONNS\tIN FLIGHT\tLS\tC\tAL\tHEADROOM\tLEARNED\tREPORT AGE\tBASE\tWEIGHT\tSHARE\tSLOTS\tREALISED\tMEASURED\tSIGNALS\t"
		if shadows {
			header += "SHADOW\t"
		}
		fmt.Fprintln(tw, header)
		for _, b := range s.Backends {
			age := "never"
			if b.LastReportAge >= 0 {
				age = fmt.Sprintf("%.1fs", b.LastReportAge)
			}
			share := 0.0
			if s.Total > 0 {
				share = float64(b.AppliedWeight) / float64(s.Total)
			}
			e := b.Explanation
			state := b.State
			if b.Slow {
				state += ",slow" // late health answers while busy: kept, at a reduced share
			}
			own, headroom, inflight := "—", "—", "—" // absent, not zero
			live := "—"                              // no count reported yet
			if b.Connections != nil && b.ConnectionsAge != nil {
				live = fmt.Sprintf("%.0f (%s, %.1fs)", *b.Connections, b.ConnectionsSource, *b.ConnectionsAge)
			}
			if b.InFlight != nil {
				inflight = fmt.Sprintf("%.0f", *b.InFlight)
			}
			if b.DispatchInFlight != nil && b.Dispatched != nil {
				inflight = fmt.Sprintf("%.0f, sent %d", *b.DispatchInFlight, *b.Dispatched)
			}
			if b.ServiceCPU != nil {
				own = fmt.Sprintf("%.1f%%", 100**b.ServiceCPU)
			}
			if e.Used != "" && e.Avail > 0 {
				headroom = fmt.Sprintf("%.3f", e.Headroom)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%s\t%.1f%%\t%.0f\t%s\t%s\t%.3f\t%.2f\t%.3f\t%s\t%.2f\t%s\t%d\t%d\t%.1f%%\t%d\t%.1f%%\t%s\t%s\t",
				b.Name, state, 100*b.CPU, own, 100*b.Mem, b.Conns, live, inflight, e.LS, e.C, e.AL, headroom, e.Learned, age, b.BaseWeight, b.AppliedWeight, 100*share,
				b.Slots, 100*b.RealisedShare, measuredColumn(b), b.Signals)
			if shadows {
				fmt.Fprintf(tw, "%s\t", shadowColumn(b))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
		for _, b := range s.Backends {
			if e := b.Explanation; e.WarmupTimer > 0 {
				fmt.Fprintf(w, "  %s warm-up: %s\n", b.Name, rampLine(e.Warmup, e.WarmupTimer, e.WarmupWatch))
			}
		}
		if line := correctionLine(s.Backends); line != "" {
			fmt.Fprintln(w, "  "+line)
		}
		fmt.Fprintln(w)
	}
}

// rampLine says where a ramping backend's warm-up stands: "5% of its weight (the timer
// would give 63%): hold: more CPU per unit of weight than the pool".
func rampLine(warm, timer float64, watch string) string {
	line := fmt.Sprintf("%.0f%% of its weight", 100*warm)
	if watch == "" {
		return line + " (timer)"
	}
	return fmt.Sprintf("%s (the timer would give %.0f%%): %s", line, 100*timer, watch)
}

// measuredColumn is the share of new connections the first switch's group counters measured
// for the backend over the last minute (the switch REALISED is for), with the count it rests
// on: "41.2% of 1234"; "pkts" in stateless mode, where the group counts packets; "—" before
// anything was counted.
func measuredColumn(b view.BackendView) string {
	if len(b.Measured) == 0 || b.Measured[0].MeasuredShare == nil {
		return "—"
	}
	m := b.Measured[0]
	unit := ""
	if m.Unit == switchsync.UnitPackets {
		unit = " pkts"
	}
	return fmt.Sprintf("%.1f%% of %d%s", 100**m.MeasuredShare, m.Total, unit)
}

// correctionLine says what the first switch does about the skew client affinity's pinned
// connections cause (MEASURED is for that switch): "share correction on 0000000000000001:
// settled (…): be1 group 4.7% (pinned 30.0%: its pinned clients alone exceed its share),
// be2 group 47.6%, …"; "" when the service is not corrected there.
func correctionLine(backends []view.BackendView) string {
	var dpid, head string
	var parts []string
	for _, b := range backends {
		if len(b.Measured) == 0 || b.Measured[0].Correction == nil {
			continue
		}
		m := b.Measured[0]
		c := m.Correction
		if head == "" {
			dpid = m.DPID
			head = fmt.Sprintf("%s (%s)", c.State, c.Reason)
		}
		if m.DPID != dpid {
			continue
		}
		part := fmt.Sprintf("%s group %.1f%%", b.Name, 100*c.GroupShare)
		switch {
		case c.PinnedShare > 0 && c.Bound != "":
			part += fmt.Sprintf(" (pinned %.1f%%: %s)", 100*c.PinnedShare, c.Bound)
		case c.PinnedShare > 0:
			part += fmt.Sprintf(" (pinned %.1f%%)", 100*c.PinnedShare)
		case c.Bound != "":
			part += " (" + c.Bound + ")"
		}
		parts = append(parts, part)
	}
	if head == "" {
		return ""
	}
	return fmt.Sprintf("share correction on %s: %s: %s", dpid, head, strings.Join(parts, ", "))
}

// shadowColumn is a backend's shadow weight and share ("—": its service has no shadow
// policy, or it has not been computed yet).
func shadowColumn(b view.BackendView) string {
	if b.ShadowWeight == nil || b.ShadowShare == nil {
		return "—"
	}
	return fmt.Sprintf("%d (%.1f%%)", *b.ShadowWeight, 100**b.ShadowShare)
}
