package nodeside

import (
	"prun/ctl"
	"prun/remote/wire"
)

// ackBatch is a daemon's side: a batch of acknowledgements from its parent.
// It takes its own and passes the others on, a frame per next hop.
func (n *node) ackBatch(body []byte) error {
	var mine [][]byte
	down := map[int][]wire.Queued{}
	_, err := wire.DecodeBatchOf(body, wire.AckDownAllowed, func(typ uint8, p []byte) {
		dest, _, b, err := wire.Header(p)
		switch {
		case err != nil:
		case int(dest) == n.me:
			mine = append(mine, b)
		default:
			if hop := ctl.NextHop(n.me, int(dest), n.boot.Fanout); hop > 0 {
				down[hop] = append(down[hop], wire.Queued{Typ: typ, P: p})
			}
		}
	})
	if err != nil {
		return err
	}
	for _, b := range mine {
		k, key, grant, err := wire.DecodeOutAck(b, 1<<40)
		if err != nil {
			return err
		}
		n.out.Ack(k, key, grant)
	}
	if n.kids != nil {
		for hop, fs := range down {
			wire.SendDown(n.kids.Send, hop, wire.ToLauncher, fs)
		}
	}
	return nil
}
