// Package health checks a service over HTTP: a GET over a new connection, bounded by a
// timeout, judged by status code and optionally by a substring of the body. It is the one
// checker of the project: the probe checks its local service with it, and the controller
// checks its probe-less (SNMP) backends with it, so "healthy" means the same on both paths.
//
// A check never takes longer than its timeout, so a hanging service cannot stall the probe's
// reports or the controller's pollers; it returns a Result rather than an error, because
// "unhealthy" is a measurement, not a failure of the caller. This package does not log, knows
// nothing of the wire format, and imports nothing of the probe or the controller: each caller
// turns its own configuration into a Spec.
package health
