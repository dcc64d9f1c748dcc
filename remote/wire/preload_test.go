package wire

import (
	"bytes"
	"testing"
)

func TestChunkRoundTrip(t *testing.T) {
	b := EncodeChunk(7, 1<<40, []byte("bytes"))
	id, off, p, err := DecodeChunk(b)
	if err != nil || id != 7 || off != 1<<40 || !bytes.Equal(p, []byte("bytes")) {
		t.Errorf("round trip: %d %d %q %v", id, off, p, err)
	}
	if _, _, p, err := DecodeChunk(EncodeChunk(0, 0, nil)); err != nil || len(p) != 0 {
		t.Errorf("empty chunk: %q %v", p, err)
	}
	bad := [][]byte{nil, b[:11], {0, 0, 0, 1, 0xff, 0, 0, 0, 0, 0, 0, 0}, {0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}
	for _, b := range bad {
		if _, _, _, err := DecodeChunk(b); err == nil {
			t.Errorf("decodeChunk(%x) accepted", b)
		}
	}
}
