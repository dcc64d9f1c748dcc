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
	"math/bits"
	"sync"
)

// A sealed frame on the wire:
//
//	length  4 bytes, big-endian: the payload's length (at most MaxFrame)
//	type    1 byte
//	payload length bytes, encrypted
//	tag     16 bytes: AES-GCM's, over the payload and the 5 bytes before it
//
// The key is the link's for that direction (deriveKeys); the nonce is the
// frame's sequence number in that direction, counted from 0 by both ends
// and never sent: a link is a reliable byte stream, so the receiver's count
// is the sender's unless frames were dropped, replayed or reordered on the
// way, and then the tag fails. Keys differ per link (both sides' fresh
// handshake bytes go into them) and per direction, so no frame opens on
// another link, nor on its own link back towards its sender, and no
// (key, nonce) pair is ever used twice.
//
// AES-GCM rather than ChaCha20-Poly1305: both are an AEAD of the standard
// toolkit; AES-GCM is in Go's standard library and runs on AES-NI and
// CLMUL here (BenchmarkLink: docs/benchmarks.md).

const (
	headerSize = 5
	tagSize    = 16
	keySize    = 32 // AES-256
)

// ErrFrameAuth is a frame that failed to open: it was altered, replayed,
// reordered, cut short or injected on the way, or sealed for another link.
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
	toListener, err := keyAEAD(prk, "prun-ctl-v2 dialer to listener")
	if err != nil {
		return linkKeys{}, err
	}
	toDialer, err := keyAEAD(prk, "prun-ctl-v2 listener to dialer")
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
// (Link.Send holds wmu from sealing to the frame's last byte written); the
// receiving end's is Recv's alone.
type direction struct {
	aead  cipher.AEAD
	seq   uint64
	nonce [12]byte
}

// next is the nonce of the next frame: 4 zero bytes, then the sequence
// number. It advances whether or not the frame is then written whole: a
// link whose write fails is dead.
func (s *direction) next() []byte {
	binary.BigEndian.PutUint64(s.nonce[4:], s.seq)
	s.seq++
	return s.nonce[:]
}

// seal appends the frame typ, payload, sealed, to dst.
func (s *direction) seal(dst []byte, typ uint8, payload []byte) []byte {
	var hdr [headerSize]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(payload)))
	hdr[4] = typ
	dst = append(dst, hdr[:]...)
	return s.aead.Seal(dst, s.next(), payload, hdr[:])
}

// readFrame reads and opens the next frame. A length over MaxFrame, which
// no sender seals, fails as a forgery before any allocation; a stream that
// ends inside a frame is an error of its own (a peer gone mid-write).
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
	payload, err := o.aead.Open(buf[:0], o.next(), buf, hdr[:])
	if err != nil {
		return Frame{}, fmt.Errorf("%w: frame %d of the link was altered, replayed, reordered or injected", ErrFrameAuth, seq)
	}
	return Frame{Type: hdr[4], Payload: payload}, nil
}

// Write buffers. A link keeps its own for frames of up to keepBelow bytes
// (heartbeats, acknowledgements, most messages); larger frames (output
// batches, preload chunks, plans) take a buffer of their size class from a
// pool shared by all links, so that a launcher with many children does not
// hold a large buffer per child, nor allocate one per frame.
const keepBelow = 64 << 10

// bigBufs are the pools of large write buffers, by size class: 2^k and
// 3*2^(k-1) bytes (a frame just over 1 MiB, an output batch's, takes a
// buffer of 1.5 MiB, not 2).
var bigBufs [2 * 33]sync.Pool

// bigClass is the size class of a buffer of at least n bytes, and its size.
func bigClass(n int) (class, size int) {
	k := bits.Len(uint(n - 1)) // 2^(k-1) < n <= 2^k
	if half := 3 << (k - 2); n <= half {
		return 2*k - 1, half
	}
	return 2 * k, 1 << k
}

// bigBuf returns an empty buffer of at least n bytes and its class.
func bigBuf(n int) (*[]byte, int) {
	class, size := bigClass(n)
	if p, ok := bigBufs[class].Get().(*[]byte); ok {
		return p, class
	}
	b := make([]byte, 0, size)
	return &b, class
}

func putBigBuf(p *[]byte, class int) {
	*p = (*p)[:0]
	bigBufs[class].Put(p)
}
