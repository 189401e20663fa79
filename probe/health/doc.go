// Package health checks the local service over HTTP, the way the collector would if it could
// reach it: a GET over a new connection, bounded by a timeout, judged by status code and
// optionally by a substring of the body.
//
// A check never takes longer than its timeout, so a hanging service cannot stall the probe's
// reports; it returns a Result rather than an error, because "unhealthy" is a measurement, not
// a failure of the probe. This package does not log and knows nothing of the wire format.
package health
