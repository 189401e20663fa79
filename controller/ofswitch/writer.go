package ofswitch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"flowweight/controller/ofwire"
)

// outQueue is the session's bounded write queue; writeLoop is its only consumer and the only
// goroutine that writes to the connection once the handshake is over (the library's
// Conn.Send only buffers, and sets its write deadline after writing, so it is not used).
//
// Two budgets share it. Our own requests (Apply, Multipart, PacketOut) wait for room, so a
// slow switch slows its callers down. Replies the peer provoked (ECHO_REPLY) never wait:
// they have a budget of their own, and a peer that makes us owe it more than that without
// reading is not a switch worth keeping, so the session ends with ErrPeerNotReading.
type outQueue struct {
	mu      sync.Mutex
	items   []queued
	msgs    int // queued plus being written
	bytes   int
	replies int // peer-provoked messages among msgs
	rbytes  int
	ctrl    int // liveness echoes queued or being written, counted apart from msgs (sendControl)
	wake    chan struct{}
	room    chan struct{} // closed (and replaced) whenever writeLoop frees space

	maxMsgs, maxBytes   int
	maxReplies, maxRepB int
}

// queued is one message waiting for writeLoop.
type queued struct {
	b     []byte
	reply bool
	ctrl  bool
}

// maxControl bounds the liveness echoes (keepalive, probe) queued at once: they are 8 or 16
// bytes each, so they need no byte budget, and there are never more than two in use.
const maxControl = 4

func newOutQueue(c Config) *outQueue {
	return &outQueue{
		wake: make(chan struct{}, 1), room: make(chan struct{}),
		maxMsgs: c.WriteQueueMessages, maxBytes: c.WriteQueueBytes,
		maxReplies: max(c.WriteQueueMessages/4, 1), maxRepB: max(c.WriteQueueBytes/4, ofwire.MaxMessageLen),
	}
}

// ErrPeerNotReading: the switch did not read what we sent it, within the write queue's
// bounds or Config.WriteTimeout; the session is closed.
var ErrPeerNotReading = errors.New("peer is not reading")

// sendReply queues a peer-provoked message without waiting. It fails, and ends the session,
// when the peer already owes us the reply budget.
func (sw *Switch) sendReply(b []byte) error {
	q := sw.out
	q.mu.Lock()
	if q.replies+1 > q.maxReplies || q.rbytes+len(b) > q.maxRepB {
		n, nb := q.replies, q.rbytes
		q.mu.Unlock()
		sw.fault(FaultWriteQueueFull, "switch not reading, closing", "unwritten_replies", n, "unwritten_bytes", nb)
		sw.close(fmt.Errorf("switch %s at %s: %w: %d replies (%d bytes) still unwritten, limit %d (%d bytes)",
			sw, sw.remote, ErrPeerNotReading, n, nb, q.maxReplies, q.maxRepB))
		return sw.closedErr()
	}
	q.push(b, true)
	q.mu.Unlock()
	return nil
}

// send queues one of our own writes, waiting for room until ctx ends or the session does. A
// write larger than the whole byte budget goes out alone once the queue is empty.
func (sw *Switch) send(ctx context.Context, b []byte) error {
	q := sw.out
	for {
		select {
		case <-sw.done:
			return sw.closedErr()
		default:
		}
		q.mu.Lock()
		own, ownB := q.msgs-q.replies, q.bytes-q.rbytes
		if own == 0 || (own+1 <= q.maxMsgs && ownB+len(b) <= q.maxBytes) {
			q.push(b, false)
			q.mu.Unlock()
			return nil
		}
		room := q.room
		q.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return fmt.Errorf("switch %s: waiting for write queue room (%d messages, %d bytes queued): %w", sw, own, ownB, ctx.Err())
		case <-sw.done:
			return sw.closedErr()
		}
	}
}

// sendControl queues a liveness echo ahead of everything not yet handed to the writer,
// outside both budgets: a queue full of our own requests means the switch is busy, not dead,
// so the echo must not wait behind them nor fail for want of room. It reports false only when
// maxControl echoes are already waiting, which the caller treats as "not sent", never as death.
func (sw *Switch) sendControl(b []byte) bool {
	q := sw.out
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ctrl >= maxControl {
		return false
	}
	q.ctrl++
	q.items = append([]queued{{b: b, ctrl: true}}, q.items...)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// push appends under q.mu and wakes the writer.
func (q *outQueue) push(b []byte, reply bool) {
	q.items = append(q.items, queued{b: b, reply: reply})
	q.msgs++
	q.bytes += len(b)
	if reply {
		q.replies++
		q.rbytes += len(b)
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take hands writeLoop everything queued; the space stays counted until release.
func (q *outQueue) take() []queued {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

// release frees the space of written messages and wakes every waiting sender.
func (q *outQueue) release(items []queued) {
	q.mu.Lock()
	for _, m := range items {
		if m.ctrl {
			q.ctrl--
			continue
		}
		q.msgs--
		q.bytes -= len(m.b)
		if m.reply {
			q.replies--
			q.rbytes -= len(m.b)
		}
	}
	close(q.room)
	q.room = make(chan struct{})
	q.mu.Unlock()
}

// writeLoop writes queued messages in order, each batch in one vectored write under
// Config.WriteTimeout (real time: the kernel's deadline, not the test clock). A failed or
// partial write leaves the stream out of step, so it ends the session.
func (sw *Switch) writeLoop() {
	q := sw.out
	for {
		select {
		case <-sw.done:
			return
		case <-q.wake:
		}
		items := q.take()
		if len(items) == 0 {
			continue
		}
		n := 0
		bufs := make(net.Buffers, len(items))
		for i, m := range items {
			bufs[i] = m.b
			n += len(m.b)
		}
		if err := sw.conn.SetWriteDeadline(time.Now().Add(sw.cfg.WriteTimeout)); err != nil {
			sw.close(fmt.Errorf("switch %s at %s: set write deadline: %w", sw, sw.remote, err))
			return
		}
		if _, err := bufs.WriteTo(sw.conn); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				sw.fault(FaultWriteTimeout, "switch not reading, closing", "bytes", n, "write_timeout", sw.cfg.WriteTimeout.String())
				err = fmt.Errorf("switch %s at %s: %w: %d bytes not written within %v", sw, sw.remote, ErrPeerNotReading, n, sw.cfg.WriteTimeout)
			} else {
				err = fmt.Errorf("write %d bytes to switch %s at %s: %w", n, sw, sw.remote, err)
			}
			sw.close(err)
			return
		}
		q.release(items)
	}
}
