package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"flowweight/controller/config"
	"flowweight/controller/history"
)

const historyUsage = `usage: flowweight-controller history [-state FILE] [-show N]

Lists the configurations the controller applied, oldest first: the version number, when it
was applied, its SHA-256, what applied it (start, file changed, SIGHUP, controller reload
-allow-removal, rollback to version N) and what it changed compared with the version before.
The newest is the running configuration. The controller keeps controller.config_history
versions (default 5) next to its state file. -show N prints version N's file.

Flags:
`

// historyCommand is `flowweight-controller history`.
func historyCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("history", flag.ContinueOnError)
	fs.SetOutput(stderr)
	statePath := fs.String("state", defaultState, "the controller's state file (as given to the controller)")
	show := fs.String("show", "", "print this version's configuration file")
	fs.Usage = func() { fmt.Fprint(fs.Output(), historyUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	store, err := historyStore(*statePath)
	if err != nil {
		fmt.Fprintln(stderr, "history:", err)
		return 1
	}
	if *show != "" {
		n, err := parseVersion(*show)
		if err != nil {
			fmt.Fprintln(stderr, "history:", err)
			return 2
		}
		e, err := store.Get(n)
		if err != nil {
			fmt.Fprintln(stderr, "history:", err)
			return 1
		}
		io.WriteString(stdout, e.Content)
		return 0
	}
	kept, err := listHistory(store, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "history:", err)
		return 1
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tAPPLIED (UTC)\tSHA256\tSOURCE\tCHANGES")
	for i, e := range kept {
		changes := "(oldest kept)"
		if i > 0 {
			changes = printable(summarize(kept[i-1], e), false)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", e.Number, e.Time.UTC().Format("2006-01-02 15:04:05"), e.Short(), e.Source, changes)
	}
	tw.Flush()
	last := kept[len(kept)-1]
	fmt.Fprintf(stdout, "version %d is the running configuration (%s); `flowweight-controller rollback` applies version %s again\n",
		last.Number, last.File, previousText(kept))
	return 0
}

// historyStore is the history of the controller whose state file is statePath.
func historyStore(statePath string) (history.Store, error) {
	if statePath == "" {
		return history.Store{}, errors.New(`-state "": a controller without a state file keeps no history`)
	}
	return history.Store{Dir: history.DirFor(statePath)}, nil
}

// listHistory lists the readable versions, reporting on w each one that is not; an error when
// none is readable.
func listHistory(store history.Store, w io.Writer) ([]history.Entry, error) {
	kept, bad, err := store.List()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no configuration recorded yet (the controller records one at start and at every applied reload; is -state the one it runs with?)", err)
	}
	if err != nil {
		return nil, err
	}
	for _, p := range bad {
		fmt.Fprintf(w, "warning: version %d skipped: %s\n", p.Number, printable(p.Error(), false))
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("%s: no readable version", store.Dir)
	}
	return kept, nil
}

// previousText names the version a rollback without N applies, or says there is none.
func previousText(kept []history.Entry) string {
	if len(kept) < 2 {
		return "(none: only one version is kept)"
	}
	return strconv.FormatUint(kept[len(kept)-2].Number, 10)
}

// summarize is config.Summary of two versions, or why it cannot be made (a version that no
// longer parses, after an upgrade say).
func summarize(prev, next history.Entry) string {
	p, err := config.Parse(prev.File, []byte(prev.Content))
	if err != nil {
		return fmt.Sprintf("(version %d does not parse: %s)", prev.Number, oneLine(err))
	}
	n, err := config.Parse(next.File, []byte(next.Content))
	if err != nil {
		return fmt.Sprintf("(does not parse: %s)", oneLine(err))
	}
	return config.Summary(p, n)
}

// oneLine is an error's text on one line.
func oneLine(err error) string {
	return clip(strings.Join(strings.Fields(err.Error()), " "), 200)
}

// printable is s with every control character but, when lines is true, newline and tab
// escaped (\x1b): what `history` and `rollback` print comes from files the controller's user
// writes (a version that failed to decode is quoted in its error), and the command runs on
// root's terminal, where an escape sequence could rewrite what it shows.
func printable(s string, lines bool) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case lines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// parseVersion reads a version number: a positive decimal integer.
func parseVersion(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("version %q: not a version number (a positive integer, as `flowweight-controller history` lists them)", s)
	}
	return n, nil
}
