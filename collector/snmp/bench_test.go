package snmp

import (
	"context"
	"testing"
)

// BenchmarkParsePoll measures the pure parsing of one poll's recorded
// varbinds (scalar GET, hrProcessorTable, tcpConnTable).
func BenchmarkParsePoll(b *testing.B) {
	_, sc := loadFixture(b, "warm_scalars")
	_, hr := loadFixture(b, "warm_hrprocessor")
	f, tcp := loadFixture(b, "warm_tcpconn")
	ports := map[uint16]bool{f.ListenPort: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseScalars(sc); err != nil {
			b.Fatal(err)
		}
		if _, err := parseProcessors(hr); err != nil {
			b.Fatal(err)
		}
		if _, _, err := parseTCPConnTable(tcp, ports); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPollFakeAgent measures one whole Poll over the replaying fake
// agent: parsing plus the Poller's own bookkeeping, no network.
func BenchmarkPollFakeAgent(b *testing.B) {
	f, _ := loadFixture(b, "warm_tcpconn")
	p, err := NewPollerWithAgent(v2cTarget(f.ListenPort), recordedAgent(b, "warm"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Poll(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
