// Package e2e holds the end-to-end smoke tests of the lab harness (build tag
// integration, run as root). The harness itself lives in e2e/lab and the HTTP
// backend used by every end-to-end test in cmd/backendd.
package e2e
