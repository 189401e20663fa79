package ofswitch

import (
	"bufio"
	"fmt"
	"io"

	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
)

// maxHandshakeBody bounds the HELLO and FEATURES_REPLY bodies we read during the handshake:
// OpenFlow 1.3's are 8 and 24 bytes, and a HELLO's version bitmaps cannot use more.
const maxHandshakeBody = 1024

// readHandshakeFrame reads one message during HELLO/FEATURES, allocating only what the
// handshake uses: an ECHO_REQUEST whole (it is echoed back), an OFPT_ERROR's first
// 4+maxErrorData bytes, a HELLO or FEATURES_REPLY up to maxHandshakeBody (longer is an
// error), and no other body at all (skipped; body is nil).
func readHandshakeFrame(br *bufio.Reader) (ofwire.Frame, error) {
	var hb [ofwire.HeaderLen]byte
	if _, err := io.ReadFull(br, hb[:]); err != nil {
		return ofwire.Frame{}, err
	}
	h, err := ofwire.ParseHeader(hb[:])
	if err != nil {
		return ofwire.Frame{}, err
	}
	n := int(h.Length) - ofwire.HeaderLen
	keep := 0
	switch h.Type {
	case of.TypeEchoRequest:
		keep = n
	case of.TypeError:
		keep = min(n, 4+maxErrorData)
	case of.TypeHello, of.TypeFeaturesReply:
		if n > maxHandshakeBody {
			return ofwire.Frame{}, fmt.Errorf("%w: %v body is %d bytes, more than the %d a handshake needs", ErrMalformed, h.Type, n, maxHandshakeBody)
		}
		keep = n
	}
	var body []byte
	if keep > 0 || h.Type == of.TypeHello || h.Type == of.TypeFeaturesReply || h.Type == of.TypeEchoRequest {
		body = make([]byte, keep)
		if _, err := io.ReadFull(br, body); err != nil {
			return ofwire.Frame{}, fmt.Errorf("read body of %v (xid %d, %d bytes): %w", h.Type, h.Xid, n, err)
		}
	}
	if _, err := br.Discard(n - keep); err != nil {
		return ofwire.Frame{}, fmt.Errorf("skip body of %v (xid %d, %d bytes): %w", h.Type, h.Xid, n, err)
	}
	return ofwire.Frame{Header: h, Body: body}, nil
}
