package balancer

import (
	"fmt"
	"strings"

	"flowweight/controller/config"
	"flowweight/controller/view"
)

// ReloadOptions qualify one reload.
type ReloadOptions struct {
	// AllowRemoval applies a file that removes a service, every backend of a service or more
	// than half of all backends (config.Removal.Mass). Without it such a reload is refused and
	// changes nothing: a file cut short while it was written looks exactly like that.
	AllowRemoval bool
	// Running is the running configuration file's content, when the caller has it. A new
	// content that is a strict prefix of it (config.CutShort) and removes anything at all is
	// refused without AllowRemoval, as is one that does not end with a newline.
	Running []byte
	// cutShort is config.CutShort of the new content, set by ReloadFile.
	cutShort string
	// Trigger says what asked for the reload ("SIGHUP", "file changed"), for the log.
	Trigger string
	// Alongside is another part of the controller that takes the same configuration (the
	// API's token, allowed hosts and limits). Its CheckReload runs before anything is applied,
	// so a bad part refuses the whole reload; its Reload runs after the balancer's.
	Alongside Reloadable
}

// Reloadable is a component that reloads with the balancer (api.Server).
type Reloadable interface {
	CheckReload(*config.Config) error
	Reload(*config.Config) error
}

// RemovalRefusedError is a reload refused because it would remove too much at once.
type RemovalRefusedError struct {
	File     string
	Removal  config.Removal
	State    string // the running controller's state file, which the confirming command must name
	CutShort string // why the file looks cut short, when that alone made the removal need confirmation
}

func (e *RemovalRefusedError) Error() string {
	why := ""
	if e.CutShort != "" {
		why = " and " + e.CutShort
	}
	return fmt.Sprintf("%s: reload refused: it would remove %s%s; if that is intended, run `flowweight-controller reload -allow-removal -config %s -state %s`",
		e.File, e.Removal, why, shellQuote(e.File), shellQuote(e.State))
}

// shellQuote quotes s for a command line an operator will paste.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Reload results, the values of flowweight_config_reloads_total's result label.
const (
	ReloadApplied = "applied"
	ReloadRefused = "refused_removal" // a mass removal without AllowRemoval
	ReloadInvalid = "invalid"         // does not parse or validate, an unreadable key, a listener change
)

// ReloadFile parses data, the whole file read once, as the configuration at path and makes it
// the running one (see Reload). Whatever the outcome it logs one line naming the file, records
// one event and counts flowweight_config_reloads_total{result}; an error changes nothing.
func (b *Balancer) ReloadFile(path string, data []byte, opt ReloadOptions) error {
	opt.cutShort = config.CutShort(opt.Running, data)
	cfg, err := config.LoadData(path, data)
	if err == nil && opt.Alongside != nil {
		err = opt.Alongside.CheckReload(cfg)
	}
	if err == nil {
		err = b.reload(path, cfg, opt)
	}
	if err == nil && opt.Alongside != nil {
		err = opt.Alongside.Reload(cfg)
	}
	log := b.log.With("file", path, "trigger", opt.Trigger)
	var refused *RemovalRefusedError
	switch {
	case err == nil:
		b.metrics.reloads.WithLabelValues(ReloadApplied).Inc()
		log.Info("configuration reloaded", "services", len(cfg.Services), "allow_removal", opt.AllowRemoval)
	case asRefused(err, &refused):
		b.metrics.reloads.WithLabelValues(ReloadRefused).Inc()
		log.Error("configuration not reloaded: it would remove too much; the running configuration is kept",
			"removed_services", refused.Removal.Services, "emptied_services", refused.Removal.Emptied,
			"removed_backends", refused.Removal.Backends, "running_backends", refused.Removal.Running, "err", err)
		b.events.Add(view.Event{Time: b.now(), Kind: "config", Text: err.Error()})
	default:
		b.metrics.reloads.WithLabelValues(ReloadInvalid).Inc()
		log.Error("configuration not reloaded; the running configuration is kept", "err", err)
		b.events.Add(view.Event{Time: b.now(), Kind: "config", Text: "reload rejected: " + firstLines(err.Error())})
	}
	return err
}

// RejectReload records a reload that failed before there was anything to parse (the file
// could not be read), with the same log line, event and count as ReloadFile's.
func (b *Balancer) RejectReload(path, trigger string, err error) {
	b.metrics.reloads.WithLabelValues(ReloadInvalid).Inc()
	b.log.Error("configuration not reloaded; the running configuration is kept", "file", path, "trigger", trigger, "err", err)
	b.events.Add(view.Event{Time: b.now(), Kind: "config", Text: "reload rejected: " + firstLines(err.Error())})
}

func asRefused(err error, out **RemovalRefusedError) bool {
	r, ok := err.(*RemovalRefusedError)
	*out = r
	return ok
}

// firstLines keeps an error's first two lines (the file and the first problem) for an event.
func firstLines(s string) string {
	first, rest, ok := strings.Cut(s, "\n")
	if !ok {
		return s
	}
	second, _, _ := strings.Cut(strings.TrimSpace(rest), "\n")
	return first + " " + second
}
