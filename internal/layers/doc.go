// Package layers holds the test that keeps the repository's import rules (docs/design.md,
// "Data flow"): data flows one way, ingest → state → weights → intent → per-switch sync, and
// no package reaches back up. It has no code of its own.
package layers
