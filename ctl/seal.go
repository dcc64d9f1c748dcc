package ctl

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// An authenticated frame on the wire:
//
//	length  4 bytes, big-endian: the payload's length (at most MaxFrame)
//	type    1 byte
//	payload length bytes, in the clear
//	tag     16 bytes: GMAC (AES-GCM sealing nothing) of the payload
//
// The header is bound through the nonce, not the additional data: the nonce
// is the frame's sequence number in its direction (7 bytes, counted from 0
// by both ends and never sent), its type and its length. A link is a
// reliable byte stream, so the receiver's count is the sender's unless frames
// were dropped, replayed or reordered on the way; a frame altered, cut short,
// injected or given another header then fails its tag. Keys differ per link
// (both sides' fresh handshake bytes go into them) and per direction, so no
// frame verifies on another link, nor on its own link back towards its
// sender, and no (key, nonce) pair is used twice (the sequence number alone
// is unique; a link that would wrap it closes).
//
// Authentication only, not encryption: AES-GCM sealing the payload as well
// cost output +11% through a 4-node tree, over the 5% the issue allowed
// (docs/benchmarks.md); GMAC alone runs at about twice its speed here, and
// keeping the header out of the additional data lets a large payload go to
// the socket by writev, uncopied, as before frames were protected. What the
// frames carry was in the clear before too; the launch secret never is.
const (
	headerSize = 5
	tagSize    = 16
	keySize    = 32 // AES-256
	maxSeq     = 1<<56 - 1
)

// ErrFrameAuth is a frame that failed to verify: it was altered, replayed,
// reordered, cut short or injected on the way, or made for another link.
// The link is closed: nothing after it on the stream can be trusted.
var ErrFrameAuth = errors.New("ctl: a frame failed authentication")

// linkKeys are one end's AEADs: seal for what it sends, open for what it
// receives.
type linkKeys struct{ seal, open cipher.AEAD }

// deriveKeys makes a link's keys from the launch secret and the handshake's
// transcript (both preambles, dialer's first): HKDF-SHA256, the transcript
// as its salt, one key per direction.
func deriveKeys(secret, transcript []byte, listener bool) (linkKeys, error) {
	prk, err := hkdf.Extract(sha256.New, secret, transcript)
	if err != nil {
		return linkKeys{}, err
	}
	toListener, err := keyAEAD(prk, "prun-ctl-v3 dialer to listener")
	if err != nil {
		return linkKeys{}, err
	}
	toDialer, err := keyAEAD(prk, "prun-ctl-v3 listener to dialer")
	if err != nil {
		return linkKeys{}, err
	}
	if listener {
		return linkKeys{seal: toDialer, open: toListener}, nil
	}
	return linkKeys{seal: toListener, open: toDialer}, nil
}

func keyAEAD(prk []byte, info string) (cipher.AEAD, error) {
	key, err := hkdf.Expand(sha256.New, prk, info, keySize)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// direction is one direction of a link at one end: its AEAD and the
// number of frames it carried. The sending end's user serialises it
// (Link.Send holds wmu from tagging to the frame's last byte written); the
// receiving end's is Recv's alone.
type direction struct {
	aead  cipher.AEAD
	seq   uint64
	nonce [12]byte
}

// next is the nonce of the next frame, whose header is hdr: the sequence
// number, then the header's type and length. It advances whether or not
// the frame is then written whole: a link whose write fails is dead.
func (s *direction) next(hdr *[headerSize]byte) ([]byte, error) {
	if s.seq > maxSeq {
		return nil, fmt.Errorf("%w: the link carried 2^56 frames", ErrFrameAuth)
	}
	binary.BigEndian.PutUint64(s.nonce[:8], s.seq<<8|uint64(hdr[4]))
	copy(s.nonce[8:], hdr[:4])
	s.seq++
	return s.nonce[:], nil
}

// header is a frame's header.
func header(typ uint8, n int) (h [headerSize]byte) {
	binary.BigEndian.PutUint32(h[:], uint32(n))
	h[4] = typ
	return h
}

// tag appends the tag of the frame hdr, payload to dst.
func (s *direction) tag(dst []byte, hdr *[headerSize]byte, payload []byte) ([]byte, error) {
	nonce, err := s.next(hdr)
	if err != nil {
		return nil, err
	}
	return s.aead.Seal(dst, nonce, nil, payload), nil
}

// frame appends the whole frame typ, payload to dst: header, payload, tag.
func (s *direction) frame(dst []byte, typ uint8, payload []byte) ([]byte, error) {
	hdr := header(typ, len(payload))
	dst = append(append(dst, hdr[:]...), payload...)
	return s.tag(dst, &hdr, payload)
}

// readFrame reads and verifies the next frame. A length over MaxFrame,
// which no sender tags, fails as a forgery before any allocation; a stream
// that ends inside a frame is an error of its own (a peer gone mid-write).
func readFrame(r io.Reader, o *direction) (Frame, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n > MaxFrame {
		return Frame{}, fmt.Errorf("%w: frame %d claims %d bytes, over %d", ErrFrameAuth, o.seq, n, MaxFrame)
	}
	buf := make([]byte, int(n)+tagSize)
	if _, err := io.ReadFull(r, buf); err != nil {
		return Frame{}, fmt.Errorf("ctl: connection closed inside a frame: %w", err)
	}
	seq := o.seq
	nonce, err := o.next(&hdr)
	if err != nil {
		return Frame{}, err
	}
	if _, err := o.aead.Open(nil, nonce, buf[n:], buf[:n]); err != nil {
		return Frame{}, fmt.Errorf("%w: frame %d of the link was altered, replayed, reordered or injected", ErrFrameAuth, seq)
	}
	return Frame{Type: hdr[4], Payload: buf[:n:n]}, nil
}

// smallFrame is the size up to which a frame is assembled in the link's own
// buffer and written in one write; larger ones (output batches, preload
// chunks, plans) go out by writev from the caller's payload, uncopied.
const smallFrame = 64 << 10
