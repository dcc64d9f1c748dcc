package wire

import (
	"bytes"
	"strings"
	"testing"
)

func TestDecodeAckRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, {1, 2, 3}, EncodeAck(StdinWindow + 1)} {
		if _, err := DecodeAck(b, StdinWindow); err == nil {
			t.Errorf("decodeAck(%x) accepted", b)
		}
	}
	if n, err := DecodeAck(EncodeAck(12345), StdinWindow); err != nil || n != 12345 {
		t.Errorf("decodeAck round trip: %d, %v", n, err)
	}
}
func TestStdinStreamFrame(t *testing.T) {
	for _, ns := range []string{"", "prun.1.s7.1", strings.Repeat("n", 300)} {
		b := append(AppendStream(nil, ns), "data"...)
		got, rest, err := SplitStream(b)
		if err != nil || got != ns || string(rest) != "data" {
			t.Errorf("%q: %q %q %v", ns, got, rest, err)
		}
	}
	for _, bad := range [][]byte{nil, {0}, {0, 3, 'a'}} {
		if _, _, err := SplitStream(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
func FuzzSplitStream(f *testing.F) {
	f.Add(append(AppendStream(nil, "prun.1.s1.1"), "x"...))
	f.Add([]byte{0, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		ns, rest, err := SplitStream(b)
		if err != nil {
			return
		}
		if again := append(AppendStream(nil, ns), rest...); !bytes.Equal(again, b) {
			t.Errorf("%q: read back as %q", b, again)
		}
	})
}
