package ofwire

import (
	"strings"
	"testing"

	"github.com/netrack/openflow/ofp"
)

func TestErrorName(t *testing.T) {
	tests := []struct {
		typ, code uint16
		wantType  string
		wantCode  string
	}{
		{uint16(ofp.ErrTypeHelloFailed), uint16(ofp.ErrCodeHelloFailedIncompatible), "OFPET_HELLO_FAILED", "OFPHFC_INCOMPATIBLE"},
		{uint16(ofp.ErrTypeGroupModFailed), uint16(ofp.ErrCodeGroupModFailedUnknownGroup), "OFPET_GROUP_MOD_FAILED", "OFPGMFC_UNKNOWN_GROUP"},
		{uint16(ofp.ErrTypeGroupModFailed), uint16(ofp.ErrCodeGroupModFailedGroupExists), "OFPET_GROUP_MOD_FAILED", "OFPGMFC_GROUP_EXISTS"},
		{uint16(ofp.ErrTypeGroupModFailed), uint16(ofp.ErrCodeGroupModPerm), "OFPET_GROUP_MOD_FAILED", "OFPGMFC_EPERM"},
		{uint16(ofp.ErrTypeBadAction), uint16(ofp.ErrCodeBadActionOutGroup), "OFPET_BAD_ACTION", "OFPBAC_BAD_OUT_GROUP"},
		{uint16(ofp.ErrTypeBadRequest), uint16(ofp.ErrCodeBadRequestMultipartBufferOverflow), "OFPET_BAD_REQUEST", "OFPBRC_MULTIPART_BUFFER_OVERFLOW"},
		{uint16(ofp.ErrTypeBadMatch), uint16(ofp.ErrCodeBadMatchBadPrereq), "OFPET_BAD_MATCH", "OFPBMC_BAD_PREREQ"},
		{uint16(ofp.ErrTypeFlowModFailed), uint16(ofp.ErrCodeFlowModFailedBadFlags), "OFPET_FLOW_MOD_FAILED", "OFPFMFC_BAD_FLAGS"},
		{uint16(ofp.ErrTypeTableFeaturesFailed), uint16(ofp.ErrCodeTableFeaturesFailedPerm), "OFPET_TABLE_FEATURES_FAILED", "OFPTFFC_EPERM"},
		{uint16(ofp.ErrTypeMeterModFailed), uint16(ofp.ErrCodeMeterModFailedOutOfBands), "OFPET_METER_MOD_FAILED", "OFPMMFC_OUT_OF_BANDS"},
		{uint16(ofp.ErrTypeGroupModFailed), 15, "OFPET_GROUP_MOD_FAILED", "CODE(15)"},
		{14, 0, "OFPET_UNKNOWN(14)", "CODE(0)"},
		{uint16(ofp.ErrTypeExperimenter), 3, "OFPET_EXPERIMENTER", "EXP_TYPE(3)"},
	}
	for _, tt := range tests {
		gt, gc := ErrorName(tt.typ, tt.code)
		if gt != tt.wantType || gc != tt.wantCode {
			t.Errorf("ErrorName(%d, %d) = %s/%s, want %s/%s", tt.typ, tt.code, gt, gc, tt.wantType, tt.wantCode)
		}
	}
}

// TestErrorNameCoversLibrary checks the table against an independent source: every
// (type, code) pair github.com/netrack/openflow knows must have a name here, and no more.
func TestErrorNameCoversLibrary(t *testing.T) {
	for typ := uint16(0); typ < 16; typ++ {
		for code := uint16(0); code < 32; code++ {
			libKnows := !strings.Contains(ofp.Error{Type: ofp.ErrType(typ), Code: ofp.ErrCode(code)}.String(), "Code(")
			_, cn := ErrorName(typ, code)
			weKnow := !strings.HasPrefix(cn, "CODE(")
			if libKnows != weKnow {
				t.Errorf("type %d code %d: library knows=%v (%v), ErrorName=%s", typ, code, libKnows, ofp.Error{Type: ofp.ErrType(typ), Code: ofp.ErrCode(code)}, cn)
			}
		}
	}
}
