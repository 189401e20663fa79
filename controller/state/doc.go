// Package state reads and writes the controller's state file: what an operator did and what
// the controller learned that the configuration file does not hold, so that it survives a
// restart (operator drains, learned capacity, the push protocol's replay marks).
//
// With HA the same document, in the same format and checked by the same Decode, is the pool's
// shared state in etcd (the balancer's Store picks the one or the other; docs/ha.md).
//
// It owns the file's format (versioned JSON, see docs/operations.md) and its atomic
// replacement; it does not know the balancer, and it never logs: errors name the file and
// what was wrong, and the caller decides what to say and what was lost. It must not import
// the balancer or the configuration (internal/layers checks).
package state
