package wire

import (
	"encoding/binary"
	"errors"
)

// What -s/--preload-binary and --preload-files send reaches the nodes ahead
// of the plan, in chunks of the launcher's files: each chunk is read once
// and sent to every node that needs it, and acknowledged by each when
// written, so that the launcher reads no faster than the slowest link and
// disk take them (a program of any size, never whole in memory). A chunk's
// body: the file's number in the plan, the offset, the bytes.
const (
	PreloadChunk  = 256 << 10
	PreloadWindow = 4 << 20
)

func EncodeChunk(id int, off int64, p []byte) []byte {
	b := make([]byte, 0, 12+len(p))
	b = binary.BigEndian.AppendUint32(b, uint32(id))
	b = binary.BigEndian.AppendUint64(b, uint64(off))
	return append(b, p...)
}
func DecodeChunk(b []byte) (id int, off int64, p []byte, err error) {
	if len(b) < 12 {
		return 0, 0, nil, errors.New("short preload chunk")
	}
	id, off = int(binary.BigEndian.Uint32(b)), int64(binary.BigEndian.Uint64(b[4:12]))
	if off < 0 || id >= 1<<20 {
		return 0, 0, nil, errors.New("bad preload chunk")
	}
	return id, off, b[12:], nil
}
