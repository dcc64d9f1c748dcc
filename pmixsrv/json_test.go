package pmixsrv

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Every value type an Info may hold comes back from JSON as itself.
func TestInfoJSONRoundTrip(t *testing.T) {
	in := []Info{
		{"s", "x"}, {"nm", NodeMap("a,b")}, {"pm", ProcMap("0,1;2")}, {"b", true}, {"f", false},
		{"u8", uint8(8)}, {"u16", uint16(16)}, {"u32", uint32(32)}, {"u64", uint64(1<<64 - 1)},
		{"r", Rank(3)}, {"w", RankWildcard}, {"sz", Size(9)}, {"i", -1}, {"i32", int32(-32)}, {"i64", int64(-1 << 62)},
		{"pid", Pid(77)}, {"st", ErrNotFound}, {"rg", DataRange(2)}, {"pe", Persistence(1)}, {"d", 0.5},
		{"by", []byte{0, 1, 255}}, {"p", Proc{"ns", 4}}, {"ps", []Proc{{"a", 1}, {"b", RankWildcard}}},
		{"in", []Info{{"k", Rank(1)}, {"nested", []Info{{"z", "y"}}}}},
		{"pi", []ProcInfo{{Proc: Proc{"a", 0}, Host: "h", Exe: "/bin/x", Pid: 5, State: 2}}},
		{"nil", nil}, {"", ""},
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out []Info
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n got %#v\nwant %#v", out, in)
	}
	if _, err := json.Marshal(Info{"k", struct{}{}}); err == nil {
		t.Error("a value of no PMIx type was encoded")
	}
	for _, bad := range []string{`{"K":"k","V":{"T":"what","V":1}}`, `{"K":"k","V":{"T":"rank","V":-1}}`, `{"K":"k","V":{"T":"bool","V":"x"}}`, `{"K":"k","V":7}`} {
		var in Info
		if err := json.Unmarshal([]byte(bad), &in); err == nil {
			t.Errorf("%s decoded as %#v", bad, in)
		}
	}
}
