package daemon

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"prun/pmixsrv"
)

// Records of several nodes, combined as the tree concatenates them, finish
// into one context id (asked by one node) and every node's data in order.
func TestFinishGroup(t *testing.T) {
	all := append(append(groupRecord(0, 0, []byte("ab")), groupRecord(GroupAssignCID|GroupNotify, 3*time.Second, nil)...), groupRecord(0, 2*time.Second, []byte("c"))...)
	calls := 0
	res, flags, err := FinishGroup(all, func() uint64 { calls++; return 42 })
	if err != nil || calls != 1 || flags != GroupAssignCID|GroupNotify|GroupTimeout {
		t.Fatalf("flags %b, %d ids, %v", flags, calls, err)
	}
	info, err := groupResult(res)
	if err != nil || len(info) != 2 || info[0].Value != pmixsrv.Size(42) || !bytes.Equal(info[1].Value.([]byte), []byte("abc")) {
		t.Errorf("result %v, %v", info, err)
	}
	if d := GroupTimeoutOf(all); d != 2*time.Second {
		t.Errorf("timeout %v, want the shortest, 2s", d)
	}
	// No node asked for an id, none had data: nothing for the members.
	res, _, _ = FinishGroup(groupRecord(0, 0, nil), func() uint64 { t.Error("an id assigned"); return 0 })
	if info, err := groupResult(res); err != nil || len(info) != 0 {
		t.Errorf("result %v, %v", info, err)
	}
	for _, bad := range [][]byte{{0, 0, 0}, {0, 0, 0, 0, 1}, {0, 0, 0, 9, 0, 1}, {0, 0, 0, 3, GroupTimeout, 0, 0}} {
		if _, _, err := FinishGroup(bad, func() uint64 { return 1 }); err == nil {
			t.Errorf("FinishGroup(%v) accepted", bad)
		}
	}
}

func FuzzFinishGroup(f *testing.F) {
	f.Add(append(groupRecord(1, 0, []byte("x")), groupRecord(2, time.Second, nil)...))
	f.Add([]byte{0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if d := GroupTimeoutOf(b); d < 0 {
			t.Errorf("timeout %v", d)
		}
		res, _, err := FinishGroup(b, func() uint64 { return 7 })
		if err != nil {
			return
		}
		if len(res) < 8 || len(res)-8 > len(b) {
			t.Errorf("%d bytes from %d", len(res), len(b))
		}
		if id := binary.BigEndian.Uint64(res); id != 7 && id != NoContextID {
			t.Errorf("id %d", id)
		}
	})
}
