package nodeside

import "prun/remote/wire"

// receivePreload stores a chunk on this node and acknowledges it.
func (n *node) receivePreload(body []byte) error {
	id, off, p, err := wire.DecodeChunk(body)
	if err != nil {
		return err
	}
	n.d.Receive(id, off, p)
	if len(p) > 0 {
		n.up.Send(wire.TPreloadAck, wire.Frame(wire.ToLauncher, uint32(n.me), wire.EncodeAck(len(p))))
	}
	return nil
}
