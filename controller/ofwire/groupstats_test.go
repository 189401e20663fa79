package ofwire

import (
	"encoding/hex"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// groupStatsRequestHex is our whole OFPMP_GROUP request for group (xid 1), hex encoded.
func groupStatsRequestHex(t testing.TB, group uint32) string {
	t.Helper()
	body, err := MultipartRequest(ofp.MultipartTypeGroup, GroupStatsRequest{GroupID: group})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := EncodeMessage(of.TypeMultipartRequest, 1, body)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(msg)
}

// The request bytes are written from OpenFlow 1.3.5 §7.3.5.9 (ofp_header, ofp_multipart_request
// with type OFPMP_GROUP = 6, ofp_group_stats_request: group_id, pad[4]); the integration test
// TestGroupStatsRequestMatchesOVSOfctl captures what `ovs-ofctl -O OpenFlow13
// dump-group-stats` sends and compares it with the same files.
func TestGroupStatsRequestGolden(t *testing.T) {
	for _, tc := range []struct {
		file  string
		group uint32
	}{
		{"group_stats_request_all.hex", GroupAll},
		{"group_stats_request_7.hex", 7},
	} {
		want, err := os.ReadFile("testdata/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if got := groupStatsRequestHex(t, tc.group); got != strings.TrimSpace(string(want)) {
			t.Errorf("%s: encoded %s, golden %s", tc.file, got, want)
		}
	}
}

func TestGroupStatsRoundTrip(t *testing.T) {
	in := []GroupStats{
		{GroupID: 7, RefCount: 1, Packets: 300, Bytes: 18000, DurationSec: 12, DurationNsec: 5,
			Buckets: []BucketCounter{{100, 6000}, {200, 12000}}},
		{GroupID: 9}, // no buckets: a group emptied by the planner
		{GroupID: 1 << 31, Packets: 1<<64 - 1, Buckets: []BucketCounter{{1<<64 - 1, 1}}},
	}
	b, err := EncodeGroupStats(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeGroupStats(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out[1].Buckets) == 0 {
		out[1].Buckets = nil
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n in  %+v\n out %+v", in, out)
	}
	if out, err := DecodeGroupStats(nil); err != nil || len(out) != 0 {
		t.Fatalf("empty reply: %v, %v", out, err)
	}
}

// TestDecodeGroupStatsRejects: every malformed length fails the whole reply with an error
// that names the field at fault, and nothing of it is returned.
func TestDecodeGroupStatsRejects(t *testing.T) {
	good, _ := EncodeGroupStats([]GroupStats{{GroupID: 7, Buckets: []BucketCounter{{1, 2}, {3, 4}}}})
	setLen := func(b []byte, n uint16) []byte {
		b = append([]byte(nil), b...)
		b[0], b[1] = byte(n>>8), byte(n)
		return b
	}
	cases := []struct {
		name string
		body []byte
		want string
	}{
		{"short fixed part", good[:39], "needs 40"},
		{"length below fixed part", setLen(good, 39), "below the fixed 40"},
		{"length zero", setLen(good, 0), "below the fixed 40"},
		{"partial bucket counter", setLen(good, 48), "not a multiple of 16"},
		{"length past the body", setLen(good, 88), "length 88, 72 bytes left"},
		{"truncated bucket", good[:len(good)-8], "length 72, 64 bytes left"},
		{"trailing bytes", append(append([]byte(nil), good...), 0, 40), "offset 72"},
		{"second entry bad", append(append([]byte(nil), good...), setLen(good, 41)...), "offset 72 (group 7): length 41"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := DecodeGroupStats(tc.body)
			if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrMalformed containing %q", err, tc.want)
			}
			if out != nil {
				t.Fatalf("returned %v with the error", out)
			}
		})
	}
}

func FuzzDecodeGroupStats(f *testing.F) {
	seed, _ := EncodeGroupStats([]GroupStats{{GroupID: 7, Buckets: []BucketCounter{{1, 2}, {3, 4}}}, {GroupID: 8}})
	f.Add(seed)
	f.Add(seed[:41])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		gs, err := DecodeGroupStats(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		// What decodes re-encodes to the same bytes but for the padding.
		re, err := EncodeGroupStats(gs)
		if err != nil {
			t.Fatal(err)
		}
		if len(re) != len(b) {
			t.Fatalf("re-encoded %d bytes from %d", len(re), len(b))
		}
		back, err := DecodeGroupStats(re)
		if err != nil || !reflect.DeepEqual(back, gs) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, gs, back)
		}
	})
}
