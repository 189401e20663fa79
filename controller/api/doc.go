// Package api serves the controller's HTTP side: the JSON API under /api/v1/, Prometheus
// /metrics, and the dashboard at /. It reads the views the balancer publishes
// (controller/view) and asks it to drain backends; of the controller's state it holds only what guards the door: the bearer token
// and allowed Host names (both replaced on reload) and the open-connection count.
//
// Server owns the http.Server, its limits (read, write and idle timeouts, header and body
// sizes, a connection cap) and the checks every request passes before any handler runs:
// a Host this API answers to (DNS rebinding), no cross-site writes (Origin, Sec-Fetch-Site:
// CSRF from a browser on the operator's machine), and a token for writes.
//
// It reads the running controller through view.Board and must not import the balancer, or
// reach into a syncer or a switch session (internal/layers checks).
package api
