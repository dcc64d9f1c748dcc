// Package ctl is the control plane's wire: length-framed messages between
// the launcher and its daemons, on connections that must prove the launch's
// secret before anything else is read from them.
//
// A connection starts with a mutual challenge-response: each side sends 32
// random bytes and answers the other's with HMAC-SHA256(secret, challenge,
// role), so a peer without the secret learns nothing it could replay and is
// refused before a single frame is parsed. The secret is 256 random bits per
// launch, handed to daemons over their SSH session's stdin, never on a
// command line or in a file.
package ctl

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// SecretSize is the length of a launch secret in bytes.
const SecretSize = 32

// MaxFrame bounds one frame's payload: a peer cannot make us allocate more.
const MaxFrame = 16 << 20

// NewSecret makes a launch secret.
func NewSecret() ([]byte, error) {
	s := make([]byte, SecretSize)
	if _, err := rand.Read(s); err != nil {
		return nil, err
	}
	return s, nil
}

// ErrAuth is a failed handshake: wrong secret, or not a prun peer at all.
var ErrAuth = errors.New("ctl: peer did not prove the launch secret")

const (
	roleListener = "prun-ctl-v1 listener"
	roleDialer   = "prun-ctl-v1 dialer"
)

func mac(secret, challenge []byte, role string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write(challenge)
	h.Write([]byte(role))
	return h.Sum(nil)
}

// Deadliner is the part of net.Conn the handshake uses to bound its time.
type Deadliner interface {
	SetDeadline(time.Time) error
}

// Handshake authenticates both ends of rw. The listener side and the dialer
// side answer with different roles, so one side's answer cannot be reflected
// back to it. A peer that stalls is dropped after timeout when rw can take
// deadlines.
func Handshake(rw io.ReadWriter, secret []byte, listener bool, timeout time.Duration) error {
	if len(secret) != SecretSize {
		return fmt.Errorf("ctl: secret of %d bytes, want %d", len(secret), SecretSize)
	}
	if d, ok := rw.(Deadliner); ok && timeout > 0 {
		d.SetDeadline(time.Now().Add(timeout))
		defer d.SetDeadline(time.Time{})
	}
	mine := make([]byte, 32)
	if _, err := rand.Read(mine); err != nil {
		return err
	}
	myRole, theirRole := roleDialer, roleListener
	if listener {
		myRole, theirRole = roleListener, roleDialer
	}
	// Both challenges go out first, so neither side waits on the other.
	if _, err := rw.Write(mine); err != nil {
		return err
	}
	theirs := make([]byte, 32)
	if _, err := io.ReadFull(rw, theirs); err != nil {
		return ErrAuth
	}
	if _, err := rw.Write(mac(secret, theirs, myRole)); err != nil {
		return err
	}
	answer := make([]byte, sha256.Size)
	if _, err := io.ReadFull(rw, answer); err != nil {
		return ErrAuth
	}
	if !hmac.Equal(answer, mac(secret, mine, theirRole)) {
		return ErrAuth
	}
	return nil
}

// Frame is one message: a type and its payload.
type Frame struct {
	Type    uint8
	Payload []byte
}

// WriteFrame writes f as: 4-byte big-endian payload length, type, payload.
func WriteFrame(w io.Writer, f Frame) error {
	if len(f.Payload) > MaxFrame {
		return fmt.Errorf("ctl: frame of %d bytes exceeds %d", len(f.Payload), MaxFrame)
	}
	return writeFrame(w, f.Type, f.Payload)
}

// copyBelow is the payload size under which a frame is copied behind its
// header for one write; larger payloads go out as they are, in one writev
// on a socket (output runs: no copy of their bytes).
const copyBelow = 4 << 10

func writeFrame(w io.Writer, typ uint8, payload []byte) error {
	var hdr [5]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(payload)))
	hdr[4] = typ
	if len(payload) < copyBelow {
		_, err := w.Write(append(hdr[:], payload...))
		return err
	}
	bufs := net.Buffers{hdr[:], payload}
	_, err := bufs.WriteTo(w)
	return err
}

// ReadFrame reads one frame; a length over MaxFrame is an error before any
// allocation.
func ReadFrame(r io.Reader) (Frame, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n > MaxFrame {
		return Frame{}, fmt.Errorf("ctl: frame of %d bytes exceeds %d", n, MaxFrame)
	}
	f := Frame{Type: hdr[4], Payload: make([]byte, n)}
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		return Frame{}, fmt.Errorf("ctl: connection closed inside a frame: %w", err)
	}
	return f, nil
}
