// Package health checks a service, one check at a time, by type: tcp (the port accepts a
// connection), http and https (a GET over a new connection, judged by status code and
// optionally by a substring of the body), and udp (a datagram sent, an answer holding an
// expected string awaited). It is the one checker of the project: the probe checks its local
// service over HTTP with it, and the controller checks its probe-less (SNMP) backends with
// it, so "healthy" means the same on both paths.
//
// A check never takes longer than its timeout, so a hanging service cannot stall the probe's
// reports or the controller's pollers; it returns a Result rather than an error, because
// "unhealthy" is a measurement, not a failure of the caller. Each Result carries its latency
// and, when it failed, a reason naming the check and what failed. A URL's credentials are sent
// as basic authentication and its password never shows: Checker.URL, every Result.Err and
// every error of New are redacted (RedactURL), and any text that quotes the URL, as net/http's
// and net/url's errors do, is scrubbed (Scrub), because the reason travels in reports and in
// the agent-check reply. This package does not log,
// knows nothing of the wire format, and imports nothing of the probe or the controller: each
// caller turns its own configuration into a Spec, TCPSpec or UDPSpec.
package health
