package health

import (
	"errors"
	"net/url"
	"strings"
)

// redacted stands for a password wherever a URL is shown; it is what url.URL.Redacted writes.
const redacted = "xxxxx"

// RedactURL returns raw fit to show in an error, a log line, a report or an agent-check reply:
// the password of its userinfo ("http://monitor:PASSWORD@host/") becomes "xxxxx", as
// url.URL.Redacted writes it. A URL that url.Parse refuses, or reads as opaque, is redacted by
// its shape instead: its whole userinfo (the authority up to the last '@'), so that a typo
// next to a password cannot leak it. Use it for every URL a check names: net/http's and
// net/url's own errors embed the raw URL.
func RedactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Opaque == "" {
		if _, has := u.User.Password(); has {
			return u.Redacted()
		}
		return raw // no password: a user name alone is not secret
	}
	if info, at, ok := userinfo(raw); ok {
		return raw[:at] + redacted + raw[at+len(info):]
	}
	return raw
}

// userinfo finds, by shape alone, the userinfo of a URL: after "scheme://" (or from the
// start when there is none) up to the last '@' before the path. at is where it starts.
func userinfo(raw string) (info string, at int, ok bool) {
	if i := strings.Index(raw, "://"); i >= 0 {
		at = i + len("://")
	}
	end := len(raw)
	if i := strings.IndexAny(raw[at:], "/?#"); i >= 0 {
		end = at + i
	}
	if j := strings.LastIndexByte(raw[at:end], '@'); j >= 0 {
		return raw[at : at+j], at, true
	}
	if at == 0 {
		// No scheme, and a '/' before any '@' ("user:pa/ss@host"): hide up to the last '@'.
		if j := strings.LastIndexByte(raw, '@'); j >= 0 {
			return raw[:j], 0, true
		}
	}
	return "", 0, false
}

// RedactError returns err's text with raw made safe wherever it appears: raw itself, its
// userinfo and its password, each replaced by its redacted form (RedactURL). It is for errors
// of code that embeds a URL it was given, such as net/url's and net/http's; a *url.Error's
// URL is rewritten too.
func RedactError(err error, raw string) string {
	if err == nil {
		return ""
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = &url.Error{Op: ue.Op, URL: RedactURL(ue.URL), Err: ue.Err}
	}
	return Scrub(err.Error(), raw)
}

// Scrub replaces raw, its userinfo and its password in msg by their redacted forms, so that
// a message built from raw (or from an error quoting it, percent-encoded or not) can be shown.
func Scrub(msg, raw string) string {
	if raw == "" || RedactURL(raw) == raw {
		return msg // nothing secret in raw
	}
	msg = strings.ReplaceAll(msg, raw, RedactURL(raw))
	var secrets []string
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		secrets = append(secrets, u.User.String())
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
	}
	if info, _, ok := userinfo(raw); ok {
		secrets = append(secrets, info)
		if _, pw, ok := strings.Cut(info, ":"); ok {
			secrets = append(secrets, pw)
		}
	}
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, redacted)
		}
	}
	return msg
}
