// Package ctl is the control plane's wire: length-framed messages between
// the launcher and its daemons, on connections that must prove the launch's
// secret before anything else is read from them, and whose every frame
// after that is authenticated with keys of that connection alone.
//
// A connection starts with a mutual challenge-response: each side sends the
// wire's version, its id (a dialer's says which vertex of the launch tree it
// is; a listener's is 0) and 32 random bytes, and answers with
// HMAC-SHA256(secret, role, both sides' preambles), so a peer
// without the secret learns nothing it could replay and is refused before a
// single frame is parsed. The secret is 256 random bits per launch, handed
// to daemons over their SSH session's stdin (or srun's), never on a command
// line or in a file.
//
// Proving the secret once is not enough: a host on the path could relay
// the handshake and then write frames of its own. So each frame carries a
// tag (seal.go): AES-256-GMAC under a key per link and direction, derived
// from the secret and both sides' random bytes, its nonce the number of
// frames sent before it in that direction with the frame's header. A frame
// altered, replayed, reordered, dropped, cut short or taken from another
// link fails to verify, and kills its link.
package ctl

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
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

// ErrAuth is a failed handshake: wrong secret, or not a prun peer at all
// (a prun older than wire version 2 looks like that too: it sends no
// version).
var ErrAuth = errors.New("ctl: peer did not prove the launch secret")

// WireVersion is the control plane's wire version: the handshake and the
// authenticated frames after it (version 3: GMAC tags, the payload in the
// clear; version 2 sealed it with AES-GCM). Both ends of a link must speak the same; a peer
// of another version is refused with a VersionError, not read.
const WireVersion = 3

// magic opens a handshake, followed by the version byte: a prun peer of
// another version is told apart from a stranger.
var magic = []byte("prunctl")

const (
	nonceSize    = 32
	versionSize  = 8                           // magic, version
	preambleSize = versionSize + 4 + nonceSize // then the sender's id, random bytes

	roleListener = "prun-ctl-v2 listener"
	roleDialer   = "prun-ctl-v2 dialer"
)

// VersionError is a handshake with a prun of another wire version (a node
// whose installed prun differs from the launcher's).
type VersionError struct{ Peer int }

func (e *VersionError) Error() string {
	return fmt.Sprintf("ctl: the peer speaks control-plane wire version %d, this prun version %d: run the same prun on every node", e.Peer, WireVersion)
}

// mac is a side's answer: the secret's proof over both preambles, as that
// side sent or received them, dialer's first.
func mac(secret []byte, role string, transcript []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(role))
	h.Write(transcript)
	return h.Sum(nil)
}

// Deadliner is the part of net.Conn the handshake uses to bound its time.
type Deadliner interface {
	SetDeadline(time.Time) error
}

// handshake authenticates both ends of rw and returns the keys of the
// frames that follow and the peer's id. The listener side and the dialer
// side answer with different roles, so one side's answer cannot be
// reflected back to it. A peer that stalls is dropped after timeout when rw
// can take deadlines.
//
// Each side answers over both sides' preambles: an answer proves the
// secret, the id its sender claimed, and that the peer saw this side's fresh
// challenge (no replay of an earlier handshake), and both ends then derive
// the same link keys only if they saw the same bytes.
func handshake(rw io.ReadWriter, secret []byte, listener bool, id uint32, timeout time.Duration) (linkKeys, uint32, error) {
	if len(secret) != SecretSize {
		return linkKeys{}, 0, fmt.Errorf("ctl: secret of %d bytes, want %d", len(secret), SecretSize)
	}
	if d, ok := rw.(Deadliner); ok && timeout > 0 {
		d.SetDeadline(time.Now().Add(timeout))
		defer d.SetDeadline(time.Time{})
	}
	mine := make([]byte, preambleSize)
	copy(mine, magic)
	mine[len(magic)] = WireVersion
	binary.BigEndian.PutUint32(mine[versionSize:], id)
	if _, err := rand.Read(mine[versionSize+4:]); err != nil {
		return linkKeys{}, 0, err
	}
	myRole, theirRole := roleDialer, roleListener
	if listener {
		myRole, theirRole = roleListener, roleDialer
	}
	// Both preambles go out first, so neither side waits on the other.
	if _, err := rw.Write(mine); err != nil {
		return linkKeys{}, 0, err
	}
	// The version first: another version's preamble may be of another
	// length.
	theirs := make([]byte, preambleSize)
	if _, err := io.ReadFull(rw, theirs[:versionSize]); err != nil {
		return linkKeys{}, 0, ErrAuth
	}
	if !bytes.Equal(theirs[:len(magic)], magic) {
		return linkKeys{}, 0, ErrAuth
	}
	if v := theirs[len(magic)]; v != WireVersion {
		return linkKeys{}, 0, &VersionError{Peer: int(v)}
	}
	if _, err := io.ReadFull(rw, theirs[versionSize:]); err != nil {
		return linkKeys{}, 0, ErrAuth
	}
	transcript := append(append(make([]byte, 0, 2*preambleSize), mine...), theirs...)
	if listener {
		transcript = append(append(transcript[:0], theirs...), mine...)
	}
	if _, err := rw.Write(mac(secret, myRole, transcript)); err != nil {
		return linkKeys{}, 0, err
	}
	answer := make([]byte, sha256.Size)
	if _, err := io.ReadFull(rw, answer); err != nil {
		return linkKeys{}, 0, ErrAuth
	}
	if !hmac.Equal(answer, mac(secret, theirRole, transcript)) {
		return linkKeys{}, 0, ErrAuth
	}
	k, err := deriveKeys(secret, transcript, listener)
	return k, binary.BigEndian.Uint32(theirs[versionSize:]), err
}

// Frame is one message: a type and its payload.
type Frame struct {
	Type    uint8
	Payload []byte
}
