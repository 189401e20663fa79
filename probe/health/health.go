package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
	"unicode/utf8"

	"flowweight/probe/config"
)

// MaxBody is how much of the body is searched for Checker.BodyContains.
const MaxBody = 64 << 10

// MaxErrLen bounds Result.Err, the size the push protocol carries.
const MaxErrLen = 128

// Result is the outcome of one check.
type Result struct {
	OK      bool
	Status  uint16        // HTTP status, 0 when there was no response
	Latency time.Duration // from sending the request to the end of the judged response
	Err     string        // why the check failed, at most MaxErrLen bytes; empty when OK
}

// Checker checks one URL.
type Checker struct {
	URL          string
	Timeout      time.Duration
	Expect       config.StatusRanges
	BodyContains string

	client *http.Client
	now    func() time.Time
}

// New returns a Checker for h. Each check opens a new connection (keep-alive is off): a
// reused connection would say nothing about whether the service still accepts new ones. No
// proxy from the environment is used and redirects are not followed, since a 3xx from the
// local service is an answer to judge, not somewhere else to go.
func New(h config.Health) (*Checker, error) {
	expect, err := config.ParseStatusRanges(h.ExpectStatus)
	if err != nil {
		return nil, fmt.Errorf("health.expect_status: %w", err)
	}
	if h.Timeout <= 0 {
		return nil, fmt.Errorf("health.timeout %v: want > 0", h.Timeout)
	}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            (&net.Dialer{Timeout: h.Timeout}).DialContext,
		DisableKeepAlives:      true,
		TLSHandshakeTimeout:    h.Timeout,
		ResponseHeaderTimeout:  h.Timeout,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &Checker{
		URL:          h.URL,
		Timeout:      h.Timeout,
		Expect:       expect,
		BodyContains: h.BodyContains,
		client: &http.Client{
			Transport:     tr,
			Timeout:       h.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now: time.Now,
	}, nil
}

// Check performs one check; it returns within Timeout (or sooner if ctx ends).
func (c *Checker) Check(ctx context.Context) Result {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	start := c.now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL, nil)
	if err != nil {
		return fail(0, 0, err.Error())
	}
	req.Header.Set("User-Agent", "flowweight-probe")
	resp, err := c.client.Do(req)
	if err != nil {
		return fail(0, c.now().Sub(start), "GET "+c.URL+": "+cause(err))
	}
	defer resp.Body.Close()
	status := uint16(resp.StatusCode)
	if resp.StatusCode < 100 || resp.StatusCode > 599 {
		status = 0
	}
	if !c.Expect.Contains(resp.StatusCode) {
		return fail(status, c.now().Sub(start), fmt.Sprintf("GET %s: status %s", c.URL, resp.Status))
	}
	// The body is read (up to MaxBody) even when not searched: a service that sends headers
	// and then stalls is not healthy, and closing early makes the server see a broken pipe.
	var found bool
	if c.BodyContains == "" {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxBody))
	} else {
		var body []byte
		body, err = io.ReadAll(io.LimitReader(resp.Body, MaxBody))
		found = bytes.Contains(body, []byte(c.BodyContains))
	}
	if err != nil {
		return fail(status, c.now().Sub(start), "GET "+c.URL+": reading body: "+cause(err))
	}
	if c.BodyContains != "" && !found {
		return fail(status, c.now().Sub(start), fmt.Sprintf("GET %s: body lacks %q", c.URL, c.BodyContains))
	}
	return Result{OK: true, Status: status, Latency: c.now().Sub(start)}
}

// cause shortens net/http's error chain to its root, which is what an operator needs
// ("connection refused", "context deadline exceeded") in 128 bytes.
func cause(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

func fail(status uint16, latency time.Duration, msg string) Result {
	return Result{Status: status, Latency: latency, Err: Truncate(msg, MaxErrLen)}
}

// Truncate shortens s to at most n bytes without splitting a UTF-8 sequence, replacing
// invalid bytes so the result is always valid UTF-8.
func Truncate(s string, n int) string {
	if !utf8.ValidString(s) {
		s = string(bytes.ToValidUTF8([]byte(s), []byte("?")))
	}
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
