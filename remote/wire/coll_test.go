package wire

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"prun/pmixsrv"
)

func TestPackVerts(t *testing.T) {
	for _, vs := range [][]int{nil, {0}, {0, 1, 2, 3}, {1, 3, 4, 5, 9}, {7}} {
		p := PackVerts(vs)
		got, err := UnpackVerts(p, 10)
		if err != nil || !slices.Equal(got, vs) {
			t.Errorf("%v -> %v -> %v, %v", vs, p, got, err)
		}
	}
	for _, bad := range [][]int{{1}, {3, 2}, {-1, 2}, {1, 11}, {0, 10, 0, 10}} {
		if _, err := UnpackVerts(bad, 10); err == nil {
			t.Errorf("unpackVerts(%v) accepted", bad)
		}
	}
}
func FuzzUnpackVerts(f *testing.F) {
	f.Add(1, 5, 7, 7)
	f.Fuzz(func(t *testing.T, a, b, c, d int) {
		vs, err := UnpackVerts([]int{a, b, c, d}, 64)
		if err == nil && len(vs) > 65 {
			t.Errorf("%d vertices of 65", len(vs))
		}
	})
}
func TestCollFrame(t *testing.T) {
	up := &CollUp{Coll: "pmix|j:*", Kind: "pmix", Verts: []int{1, 4}, Procs: []pmixsrv.Proc{{Nspace: "j", Rank: 1}}}
	var got CollUp
	data, err := DecodeColl(EncodeColl(up, []byte("\x00\xffdata")), &got)
	if err != nil || !reflect.DeepEqual(&got, up) || string(data) != "\x00\xffdata" {
		t.Errorf("round trip: %+v %q, %v", got, data, err)
	}
	// A failed collective keeps the launcher's words and the status.
	res := &CollResult{Coll: "k", Status: StatusOf(fmt.Errorf("node h lost: %w", pmixsrv.ErrUnreach))}
	var back CollResult
	if _, err := DecodeColl(EncodeColl(res, nil), &back); err != nil {
		t.Fatal(err)
	}
	if err := back.CollErr(); !errors.Is(err, pmixsrv.ErrUnreach) || !strings.Contains(err.Error(), "node h lost") {
		t.Errorf("result error came back as %v", err)
	}
}
func FuzzDecodeColl(f *testing.F) {
	f.Add(EncodeColl(&CollUp{Coll: "k"}, []byte("abc")))
	f.Add(EncodeColl(&CollResult{Coll: "k", Status: Status{Err: "x", Code: -1}}, nil))
	f.Add([]byte{0, 0, 0, 9, '{', '}'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m CollUp
		data, err := DecodeColl(b, &m)
		if err != nil {
			return
		}
		var again CollUp
		data2, err := DecodeColl(EncodeColl(&m, data), &again)
		if err != nil || string(data2) != string(data) || again.Coll != m.Coll {
			t.Errorf("round trip of %q: %+v, %v", b, again, err)
		}
	})
}
