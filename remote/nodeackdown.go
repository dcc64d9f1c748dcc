package remote

import (
	"prun/ctl"
)

// ackBatch is a daemon's side: a batch of acknowledgements from its parent.
// It takes its own and passes the others on, a frame per next hop.
func (n *node) ackBatch(body []byte) error {
	var mine [][]byte
	down := map[int][]queued{}
	_, err := decodeBatchOf(body, ackDownAllowed, func(typ uint8, p []byte) {
		dest, _, b, err := header(p)
		switch {
		case err != nil:
		case int(dest) == n.me:
			mine = append(mine, b)
		default:
			if hop := ctl.NextHop(n.me, int(dest), n.boot.Fanout); hop > 0 {
				down[hop] = append(down[hop], queued{typ, p})
			}
		}
	})
	if err != nil {
		return err
	}
	for _, b := range mine {
		k, key, grant, err := decodeOutAck(b, 1<<40)
		if err != nil {
			return err
		}
		n.out.ack(k, key, grant)
	}
	if n.kids != nil {
		for hop, fs := range down {
			sendDown(n.kids.send, hop, toLauncher, fs)
		}
	}
	return nil
}
