package remote

// receivePreload stores a chunk on this node and acknowledges it.
func (n *node) receivePreload(body []byte) error {
	id, off, p, err := decodeChunk(body)
	if err != nil {
		return err
	}
	n.d.Receive(id, off, p)
	if len(p) > 0 {
		n.up.Send(tPreloadAck, frame(toLauncher, uint32(n.me), encodeAck(len(p))))
	}
	return nil
}
