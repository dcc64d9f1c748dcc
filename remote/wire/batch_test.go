package wire

import (
	"bytes"
	"encoding/binary"
	"testing"

	"prun/iof"
)

func TestBatchRoundTrip(t *testing.T) {
	in := []Queued{
		{TOutput, OutputFrame(3, iof.Source{Rank: 1}, iof.Stdout, []byte("a line\n"), false)},
		{TEvent, Frame(ToLauncher, 3, []byte(`{"Kind":1}`))},
		{TEnd, Frame(ToLauncher, 3, nil)},
	}
	var out []Queued
	k, err := DecodeBatch(EncodeBatch(in), func(typ uint8, p []byte) { out = append(out, Queued{Typ: typ, P: p}) })
	if err != nil || k != len(in) || len(out) != len(in) {
		t.Fatalf("%d frames back (%d counted), %v", len(out), k, err)
	}
	for i := range in {
		if out[i].Typ != in[i].Typ || !bytes.Equal(out[i].P, in[i].P) {
			t.Errorf("frame %d came back as %d %q, want %d %q", i, out[i].Typ, out[i].P, in[i].Typ, in[i].P)
		}
	}

	// Nothing of a malformed batch is handled.
	good := EncodeBatch(in)
	for name, b := range map[string][]byte{
		"empty":        nil,
		"cut header":   good[:3],
		"cut frame":    good[:len(good)-1],
		"huge length":  append([]byte{TOutput}, binary.BigEndian.AppendUint32(nil, 1<<31)...),
		"a collective": EncodeBatch([]Queued{{TOutput, []byte("12345678")}, {TColl, []byte("12345678")}}),
		"a batch":      EncodeBatch([]Queued{{TBatch, good}}),
		"a hello":      EncodeBatch([]Queued{{THello, Frame(ToLauncher, 1, []byte("{}"))}}),
	} {
		n := 0
		if _, err := DecodeBatch(b, func(uint8, []byte) { n++ }); err == nil || n > 0 {
			t.Errorf("%s: %v, %d frames handled; want an error and none", name, err, n)
		}
	}
}
func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch([]Queued{{TOutput, []byte("12345678abc")}, {TEvent, []byte("12345678{}")}}))
	f.Add([]byte{TOutput, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		total := 0
		k, err := DecodeBatch(b, func(typ uint8, p []byte) {
			if !Batchable(typ) {
				t.Fatalf("type %d handed on", typ)
			}
			total += 5 + len(p)
		})
		if err == nil && (total != len(b) || k == 0) {
			t.Fatalf("%d frames of %d bytes from a batch of %d", k, total, len(b))
		}
	})
}
