package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestUsageNamesEverySubcommand: the usage text and the dispatch table name the same
// commands, so a command is neither advertised and missing nor there and undocumented.
func TestUsageNamesEverySubcommand(t *testing.T) {
	var inUsage []string
	for _, m := range regexp.MustCompile(`(?m)^\s*(?:usage: )?controller ([a-z][a-z-]*)`).FindAllStringSubmatch(usage, -1) {
		inUsage = append(inUsage, m[1])
	}
	var inTable []string
	for name := range subcommands {
		inTable = append(inTable, name)
	}
	slices.Sort(inUsage)
	slices.Sort(inTable)
	if !slices.Equal(slices.Compact(inUsage), inTable) {
		t.Fatalf("usage names %s; the table dispatches %s", strings.Join(inUsage, ","), strings.Join(inTable, ","))
	}
}
