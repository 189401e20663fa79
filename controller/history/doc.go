// Package history keeps the configurations the controller applied: the last few versions of
// controller.toml, each with when it was applied, its SHA-256 and what applied it (the start,
// a file change, SIGHUP, a confirmed removal, a rollback), so that an operator can see what
// changed and roll back fast (`controller history`, `controller rollback`).
//
// It owns the history directory's format (one JSON file per version, next to the state file,
// mode 0600 in a 0700 directory) and its bound; every write is atomic (the state package's
// WriteFileAtomic), and a version that cannot be read is skipped and reported, never taken
// for another. It does not parse configurations and never logs: errors name the path and
// the caller decides what to say. It must not import the balancer or the configuration
// (internal/layers checks).
package history
