// Package secretfile reads small secret files (shared keys, bearer tokens) with the checks
// every such file gets in flowweight: a regular file, not readable by others, not writable
// by group or others, and small. One checker, so the push key and the API token are refused
// for the same reasons with the same words.
//
// Like everything in internal/, it must not import the probe, the collector, the weights or
// the controller (internal/layers checks).
package secretfile
