package wire

import (
	"encoding/binary"
	"errors"
)

// The launcher's stdin reaches remote ranks through the control plane with
// end-to-end flow control: the launcher sends at most stdinWindow bytes a
// node has not yet handed to its ranks, and the node acknowledges what its
// ranks took (every stdinAckEvery bytes, and whenever it runs dry). A rank
// that does not read thus holds up the launcher's reading, as a pipe would,
// instead of its node buffering the whole input.
const (
	StdinWindow   = 1 << 20
	StdinAckEvery = 64 << 10
)

func EncodeAck(n int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

// DecodeAck reads an acknowledgement of at most limit bytes.
func DecodeAck(b []byte, limit int) (int, error) {
	if len(b) != 8 {
		return 0, errors.New("bad acknowledgement")
	}
	n := binary.BigEndian.Uint64(b)
	if n > uint64(limit) {
		return 0, errors.New("bad acknowledgement")
	}
	return int(n), nil
}

// AppendStream starts a stdin frame's body with its stream's name.
func AppendStream(b []byte, nspace string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(nspace)))
	return append(b, nspace...)
}

// SplitStream reads a stdin frame's stream name and returns the rest.
func SplitStream(body []byte) (nspace string, rest []byte, err error) {
	if len(body) < 2 {
		return "", nil, errors.New("bad stdin frame")
	}
	n := int(binary.BigEndian.Uint16(body))
	if len(body) < 2+n {
		return "", nil, errors.New("bad stdin frame")
	}
	return string(body[2 : 2+n]), body[2+n:], nil
}
