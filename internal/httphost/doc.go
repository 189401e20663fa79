// Package httphost parses the value of an HTTP Host header (and the operator's list of
// names the controller's API answers to) into a form that compares exactly. One parser for
// both, so a name the configuration accepts is matched the way a browser sends it.
//
// Like everything in internal/, it must not import the probe, the collector, the weights or
// the controller (internal/layers checks).
package httphost
