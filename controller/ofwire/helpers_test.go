package ofwire

import (
	"encoding/binary"
	"testing"

	"github.com/netrack/openflow/ofp"
)

// Small builders for the tests of this package (the planner has its own vocabulary).

func xm(t ofp.XMType, v []byte) ofp.XM {
	return ofp.XM{Class: ofp.XMClassOpenflowBasic, Type: t, Value: ofp.XMValue(v)}
}

func port16(p uint16) []byte { return binary.BigEndian.AppendUint16(nil, p) }

func setField(t ofp.XMType, v []byte) ofp.Action { return &ofp.ActionSetField{Field: xm(t, v)} }

func output(port ofp.PortNo, maxLen uint16) ofp.Action {
	return &ofp.ActionOutput{Port: port, MaxLen: maxLen}
}

func apply(a ...ofp.Action) ofp.Instructions {
	return ofp.Instructions{&ofp.InstructionApplyActions{Actions: a}}
}

func gotoTable(t uint8) ofp.Instructions {
	return ofp.Instructions{&ofp.InstructionGotoTable{Table: ofp.Table(t)}}
}

func mustInstructions(t testing.TB, in ofp.Instructions) string {
	t.Helper()
	b, err := AppendInstructions(nil, in)
	if err != nil {
		t.Fatalf("encoding instructions %v: %v", in, err)
	}
	return string(b)
}

// mustActions is AppendActions, the encoder under test (encodeActions is the library's).
func mustActions(t testing.TB, as ofp.Actions) string {
	t.Helper()
	b, err := AppendActions(nil, as)
	if err != nil {
		t.Fatalf("encoding actions %v: %v", as, err)
	}
	return string(b)
}
