package snmp

import (
	"context"
	"testing"
)

// BenchmarkParsePoll measures the pure parsing of one poll's recorded
// varbinds (scalar GET, hrProcessorTable, both TCP connection tables).
func BenchmarkParsePoll(b *testing.B) {
	_, sc := loadFixture(b, "warm_scalars")
	_, hr := loadFixture(b, "warm_hrprocessor")
	f, tcp := loadFixture(b, "warm_tcpconn")
	_, tcpx := loadFixture(b, "warm_tcpconnection")
	ports := []uint16{f.ListenPort, f.ListenPortDual}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseScalars(sc); err != nil {
			b.Fatal(err)
		}
		if _, err := parseProcessors(hr); err != nil {
			b.Fatal(err)
		}
		legacy, err := parseTCPConnTable(tcp)
		if err != nil {
			b.Fatal(err)
		}
		modern, err := parseTCPConnectionTable(tcpx)
		if err != nil {
			b.Fatal(err)
		}
		countServiceConns(ports, legacy, &modern)
	}
}

// BenchmarkPollFakeAgent measures one whole Poll over the replaying fake
// agent: parsing plus the Poller's own bookkeeping, no network.
func BenchmarkPollFakeAgent(b *testing.B) {
	f, _ := loadFixture(b, "warm_tcpconn")
	p, err := NewPollerWithAgent(v2cTarget(f.ListenPort, f.ListenPortDual), recordedAgent(b, "warm"))
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
