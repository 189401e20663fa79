//go:build !unix

package main

// lockDir has no lock to take off Unix: two rollbacks at once are not kept apart there.
func lockDir(string) (func(), error) { return func() {}, nil }
