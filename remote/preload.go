package remote

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"prun/remote/wire"
	"sort"

	"prun/daemon"
)

// Preload sends every node what its ranks need under plan p, ahead of the
// plan: the programs of the apps with ranks there, and the files. It
// returns when every node has written them all, with the SHA-256 of each
// file sent (by its ID), or at the first failure, or after StopPreload.
func (t *Tree) Preload(p *daemon.Plan) (map[int]string, error) {
	vertex := map[string]int{}
	for i, h := range t.cfg.Hosts {
		vertex[h] = i + 1
	}
	files := map[int]daemon.File{}
	to := map[int][]int{} // by file: the vertices that need it
	for _, n := range p.Map.Nodes {
		v := vertex[n.Name]
		if v == 0 || len(n.Procs) == 0 {
			continue
		}
		needs := map[int]bool{}
		for _, r := range n.Procs {
			if a := p.Map.Procs[r].App; a < len(p.Programs) && p.Programs[a].Name != "" {
				needs[p.Programs[a].ID], files[p.Programs[a].ID] = true, p.Programs[a]
			}
		}
		for _, f := range p.Files {
			needs[f.ID], files[f.ID] = true, f
		}
		for id := range needs {
			to[id] = append(to[id], v)
		}
	}
	ids := make([]int, 0, len(to))
	for id := range to {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	sums := map[int]string{}
	for _, id := range ids {
		sum, err := t.sendFile(files[id], to[id])
		if err != nil {
			return nil, fmt.Errorf("sending %s: %w", files[id].Source, err)
		}
		sums[id] = sum
	}
	return sums, nil
}

// StopPreload ends a Preload under way, and any later one, with an error:
// the launch is given up.
func (t *Tree) StopPreload() {
	for _, w := range t.preload {
		w.Kill()
	}
}
func (t *Tree) sendFile(f daemon.File, to []int) (string, error) {
	r, err := os.Open(f.Source)
	if err != nil {
		return "", err
	}
	defer r.Close()
	h := sha256.New()
	buf := make([]byte, wire.PreloadChunk)
	var off int64
	for {
		k, err := io.ReadFull(r, buf)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return "", err
		}
		h.Write(buf[:k])
		// An empty file still sends one chunk, which makes it there.
		if k > 0 || off == 0 {
			for _, v := range to {
				if err := t.preload[v-1].Acquire(k); err != nil {
					return "", fmt.Errorf("%s: %w", t.cfg.Hosts[v-1], err)
				}
				if err := t.kids.Send(v, wire.TPreload, wire.Frame(uint32(v), wire.ToLauncher, wire.EncodeChunk(f.ID, off, buf[:k]))); err != nil {
					return "", fmt.Errorf("%s: %w", t.cfg.Hosts[v-1], err)
				}
			}
			off += int64(k)
		}
		if k < len(buf) {
			break
		}
	}
	if off != f.Size {
		return "", fmt.Errorf("it changed while it was sent (%d bytes, then %d)", f.Size, off)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
