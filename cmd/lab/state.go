package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultStateDir is where `up` records the running lab, so that `status` and `down` find it
// from any working directory (and a fresh clone finds a lab started from another one).
const DefaultStateDir = "/run/flowweight-lab"

// State is what `up` records about the lab it started. Everything `down` needs to undo the
// lab is here: the supervisor's PID (the only process `down` signals), and the prefix and
// directory that e2e/lab.Sweep uses as a backstop.
type State struct {
	PID     int       `json:"pid"`     // the supervisor (`lab serve`)
	ID      string    `json:"id"`      // the lab id; Prefix is "fw"+ID
	Prefix  string    `json:"prefix"`  // starts every namespace, interface and cgroup name
	Dir     string    `json:"dir"`     // the lab directory: bin/, ovs/, configs, logs
	Bridge  string    `json:"bridge"`  // the Open vSwitch bridge
	Mgmt    string    `json:"mgmt"`    // the bridge's management socket (ovs-ofctl target unix:MGMT)
	CtlNS   string    `json:"ctl_ns"`  // the controller's network namespace
	API     string    `json:"api"`     // the controller's API address inside CtlNS
	Proxy   string    `json:"proxy"`   // the supervisor's forwarder to the API in the root namespace
	VIP     string    `json:"vip"`     // the service address clients use (inside the lab)
	Started time.Time `json:"started"` // when `up` started the supervisor
}

// Files in the state directory.
const (
	stateFile      = "state.json"
	supervisorLog  = "supervisor.log"
	storyLog       = "story.log"
	storyDone      = "== story done"
	storyFailed    = "== lab failed"
	labDirPrefix   = "fwlab."
	supervisorVerb = "serve"
)

var idPattern = regexp.MustCompile(`^[a-z0-9]{1,6}$`)

// newState derives every name from the lab id and directory, the same way e2e/scenario and
// e2e/lab name them (bridge "br", host "ctl", OVS run directory DIR/ovs).
func newState(id, dir string, pid int, proxy string, vip string, now time.Time) State {
	p := "fw" + id
	return State{PID: pid, ID: id, Prefix: p, Dir: dir, Bridge: p + "-br",
		Mgmt: filepath.Join(dir, "ovs", p+"-br.mgmt"), CtlNS: p + "-ctl", API: "127.0.0.1:9090",
		Proxy: proxy, VIP: vip, Started: now}
}

// ParseState decodes and checks a state file. A state that fails the checks is refused
// rather than acted on: `down` signals its PID and sweeps its prefix.
func ParseState(data []byte) (State, error) {
	var st State
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return State{}, fmt.Errorf("state: %w", err)
	}
	var errs []error
	if st.PID <= 1 {
		errs = append(errs, fmt.Errorf("pid %d: want a supervisor pid > 1", st.PID))
	}
	if !idPattern.MatchString(st.ID) {
		errs = append(errs, fmt.Errorf("id %q: want 1-6 characters of [a-z0-9]", st.ID))
	}
	if st.Prefix != "fw"+st.ID {
		errs = append(errs, fmt.Errorf("prefix %q: want %q", st.Prefix, "fw"+st.ID))
	}
	if err := checkLabDir(st.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return State{}, fmt.Errorf("state: %w", err)
	}
	return st, nil
}

// checkLabDir accepts only directories `up` creates (an absolute path whose last element
// starts with "fwlab."), because `down` removes the directory recursively.
func checkLabDir(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || !strings.HasPrefix(filepath.Base(dir), labDirPrefix) {
		return fmt.Errorf("dir %q: want an absolute, clean path whose last element starts with %q", dir, labDirPrefix)
	}
	return nil
}

// readState reads DIR/state.json; os.ErrNotExist (wrapped) when no lab was started.
func readState(stateDir string) (State, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, stateFile))
	if err != nil {
		return State{}, err
	}
	return ParseState(data)
}

func writeState(stateDir string, st State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	path := filepath.Join(stateDir, stateFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}

// IsSupervisor reports whether a process command line (NUL-separated, as in
// /proc/PID/cmdline) is the supervisor of lab id: "... serve ... -id ID ...". It guards
// against a recycled PID: `down` only signals a process that passes it.
func IsSupervisor(cmdline []byte, id string) bool {
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) < 2 || filepath.Base(args[0]) != "lab" || args[1] != supervisorVerb {
		return false
	}
	for i := 2; i+1 < len(args); i++ {
		if (args[i] == "-id" || args[i] == "--id") && args[i+1] == id {
			return true
		}
	}
	return false
}

// supervisorAlive reports whether st's supervisor still runs (and is not a zombie).
func supervisorAlive(st State) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(st.PID) + "/cmdline")
	if err != nil || !IsSupervisor(cmdline, st.ID) {
		return false
	}
	return !isZombie(st.PID)
}

func isZombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
