package wire

import (
	"encoding/binary"
	"errors"

	"prun/iof"
)

// OutWindow is the window of each of n nodes: 64 MiB over all the nodes,
// but at least a reader's largest run (iof's 256 KiB) and at most 2 MiB.
func OutWindow(n int) int {
	return min(max(64<<20/max(n, 1), 256<<10), 2<<20)
}

// OutKey is one stream of one rank.
type OutKey struct {
	Src iof.Source
	St  iof.Stream
}

// OutputFrame is frame(toLauncher, me, encodeOutput(...)) with one copy
// of p instead of two: output is the bulk of the traffic.
func OutputFrame(me uint32, src iof.Source, st iof.Stream, p []byte, partial bool) []byte {
	b := make([]byte, 8, 8+14+len(p))
	binary.BigEndian.PutUint32(b, ToLauncher)
	binary.BigEndian.PutUint32(b[4:], me)
	return append(append(b, EncodeOutput(src, st, nil, partial)...), p...)
}

// EncodeOutAck is an acknowledgement of n bytes, with a grant for the
// stream k when grant is set.
func EncodeOutAck(n int, k OutKey, grant bool) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(n))
	if grant {
		b = append(b, EncodeOutput(k.Src, k.St, nil, false)...)
	}
	return b
}
func DecodeOutAck(b []byte, limit int) (n int, k OutKey, grant bool, err error) {
	if len(b) != 8 && len(b) != 8+14 {
		return 0, k, false, errors.New("bad output acknowledgement")
	}
	if n, err = DecodeAck(b[:8], limit); err != nil {
		return 0, k, false, err
	}
	if len(b) > 8 {
		k.Src, k.St, _, _, err = DecodeOutput(b[8:])
		grant = err == nil
	}
	return n, k, grant, err
}
