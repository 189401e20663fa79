//go:build race

package balancer

// raceEnabled: the race detector makes TOML parsing about ten times slower, so the
// every-byte tests sample their offsets (see TestReloadRefusesEveryCutPrefix).
const raceEnabled = true
