package tcflower

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/mdlayher/netlink"
	vnl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/internal/netdev"
	"github.com/scrubd/scrubd/offload/nlerr"
)

// Client talks rtnetlink for tc: flower filters and the clsact qdisc. Its
// methods are safe for concurrent use, but requests are serialized on one
// socket; open several Clients to insert in parallel (cls_flower inserts
// without RTNL).
type Client struct {
	mu   sync.Mutex
	conn *netlink.Conn

	// rt carries the qdisc requests (vishvananda/netlink, see qdisc.go).
	// Dial opens it with conn, in the same network namespace; a Client
	// from NewClient opens it on its first qdisc request, in the calling
	// thread's namespace.
	rtMu sync.Mutex
	rt   *vnl.Handle
}

// readBuffer is the socket receive buffer asked for (SO_RCVBUFFORCE as
// root): a window of acks, echoes and dump parts must fit.
const readBuffer = 8 << 20

// Dial opens an rtnetlink socket for the filters with Strict options
// (extended ACK and strict checking of dump requests), and a
// vishvananda/netlink Handle for the qdisc and device-name requests, both
// in the calling thread's network namespace.
//
// NETLINK_CAP_ACK is deliberately left off: mdlayher/netlink v1.11.2
// locates the extack TLVs after the echoed request using the request's
// original nlmsg_len, which a capped ACK does not carry, so with CAP_ACK the
// extack message would be dropped as a short message.
func Dial() (*Client, error) {
	c, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{Strict: true})
	if err != nil {
		return nil, nlerr.Wrap("dial", "", "", err)
	}
	// Best effort: without it the default buffer still holds a smaller window.
	_ = c.SetReadBuffer(readBuffer)
	rt, err := vnl.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		c.Close()
		return nil, nlerr.Wrap("dial", "", "", err)
	}
	return &Client{conn: c, rt: rt}, nil
}

// NewClient wraps an existing connection (tests pass an nltest or fake
// socket). The connection should have extended ACK enabled.
func NewClient(c *netlink.Conn) *Client { return &Client{conn: c} }

// Close closes the sockets.
func (c *Client) Close() error {
	c.rtMu.Lock()
	if c.rt != nil {
		c.rt.Close()
		c.rt = nil
	}
	c.rtMu.Unlock()
	return c.conn.Close()
}

// route returns the handle for qdisc requests, opening it if needed.
func (c *Client) route() (*vnl.Handle, error) {
	c.rtMu.Lock()
	defer c.rtMu.Unlock()
	if c.rt == nil {
		rt, err := vnl.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return nil, err
		}
		c.rt = rt
	}
	return c.rt, nil
}

// OpKind is what a batch operation does.
type OpKind uint8

// Operations.
const (
	// OpAdd creates the filter (NLM_F_CREATE|NLM_F_EXCL): EEXIST if its
	// handle is taken, and also if another filter of the same chain and
	// priority has the same key and mask (cls_flower keeps keys unique per
	// mask; no extack on 6.1).
	OpAdd OpKind = iota
	// OpReplace creates the filter or replaces the one with the same
	// handle in place (NLM_F_CREATE without EXCL); the counters restart.
	// The kernel refuses (EINVAL) a replacement whose key has a different
	// mask than the old filter's: see Key.MaskEqual.
	OpReplace
	// OpDelete deletes the filter with this chain/prio/protocol/handle.
	OpDelete
)

func (k OpKind) String() string {
	switch k {
	case OpAdd:
		return "install"
	case OpReplace:
		return "replace"
	case OpDelete:
		return "delete"
	}
	return "op" + strconv.Itoa(int(k))
}

// Op is one request of a batch.
type Op struct {
	Kind   OpKind
	Filter Filter
}

// Result is the outcome of one Op.
type Result struct {
	// Filter is the filter as the kernel echoed it (handle filled in) when
	// BatchOptions.Echo was set and the op added or replaced; zero otherwise.
	Filter Filter
	// Warning is an extack message the kernel sent with a successful ACK
	// (e.g. "Failed to setup flow action" with the verbose flag).
	Warning string
	// Err is nil or an *nlerr.Error (or a *ValidationError, in which case
	// nothing was sent). After a socket-level receive error (e.g. ENOBUFS)
	// every request of the window still unanswered carries that error,
	// although the kernel may have applied it: dump to find out.
	Err error
}

// BatchOptions tune Batch.
type BatchOptions struct {
	// Echo asks the kernel to send each added/replaced filter back
	// (NLM_F_ECHO), so allocated handles are known.
	Echo bool
	// Window is how many requests go out in one sendmsg before their ACKs
	// are read; 0 means 128. The kernel queues all ACKs of a sendmsg before
	// returning, so the receive buffer must hold a window of them.
	Window int
}

// Batch sends ops, Window requests per sendmsg, and returns one Result per
// op in order. A failing op does not stop the others (the kernel processes
// every message of a sendmsg and ACKs each). Invalid filters are rejected
// before anything is sent.
func (c *Client) Batch(ops []Op, o BatchOptions) []Result {
	res := make([]Result, len(ops))
	w := o.Window
	if w <= 0 {
		w = 128
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var msgs []netlink.Message
	var idx []int
	for start := 0; start < len(ops); start += w {
		end := min(start+w, len(ops))
		msgs, idx = msgs[:0], idx[:0]
		for i := start; i < end; i++ {
			m, err := buildOp(&ops[i], o.Echo)
			if err != nil {
				res[i].Err = err
				continue
			}
			msgs = append(msgs, m)
			idx = append(idx, i)
		}
		if len(msgs) == 0 {
			continue
		}
		// The kernel answers a request without NLM_F_ACK only when it
		// fails (netlink_rcv_skb), and handles the requests of one sendmsg
		// in order before sendmsg returns: one ACK on the last request of
		// the window tells that all earlier ones without an error reply
		// succeeded. Verbose requests keep their ACK, which carries the
		// driver's warning.
		for j := range msgs[:len(msgs)-1] {
			if ops[idx[j]].Filter.Flags&Verbose == 0 {
				msgs[j].Header.Flags &^= netlink.Acknowledge
			}
		}
		c.exchange(ops, res, msgs, idx)
	}
	return res
}

func buildOp(op *Op, echo bool) (netlink.Message, error) {
	f := &op.Filter
	flags := netlink.Request | netlink.Acknowledge
	var typ netlink.HeaderType
	var data []byte
	var err error
	switch op.Kind {
	case OpAdd, OpReplace:
		if err := f.Validate(); err != nil {
			return netlink.Message{}, err
		}
		typ = rtmNewFilter
		flags |= netlink.Create
		if op.Kind == OpAdd {
			flags |= netlink.Excl
		}
		if echo {
			flags |= netlink.Echo
		}
		data, err = f.MarshalBinary()
	case OpDelete:
		if f.Ifindex <= 0 || f.Prio == 0 || f.Protocol == 0 {
			return netlink.Message{}, verr("delete", f.ID(), "needs ifindex, prio and protocol")
		}
		typ = rtmDelFilter
		data, err = f.marshalSelector()
	default:
		return netlink.Message{}, verr("op", op.Kind, "unknown operation")
	}
	if err != nil {
		return netlink.Message{}, err
	}
	return netlink.Message{Header: netlink.Header{Type: typ, Flags: flags}, Data: data}, nil
}

// marshalSelector encodes tcmsg, kind and chain only: the form used to
// delete or get one filter.
func (f *Filter) marshalSelector() ([]byte, error) {
	ae := netlink.NewAttributeEncoder()
	ae.String(tcaKind, "flower")
	ae.Uint32(tcaChain, f.Chain)
	attrs, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	return append(f.header().append(nil), attrs...), nil
}

// exchange sends msgs in one sendmsg and reads until every one is ACKed.
// Called with c.mu held.
func (c *Client) exchange(ops []Op, res []Result, msgs []netlink.Message, idx []int) {
	sent, err := c.conn.SendMessages(msgs)
	if err != nil {
		for _, i := range idx {
			res[i].Err = c.opErr(&ops[i], err)
		}
		return
	}
	pending := make(map[uint32]int, len(sent))
	for j, m := range sent {
		pending[m.Header.Sequence] = idx[j]
	}
	lastSeq := sent[len(sent)-1].Header.Sequence
	for len(pending) > 0 {
		if _, ok := pending[lastSeq]; !ok {
			// The last request is answered, so every earlier one was
			// processed; those still pending asked for no ACK and got no
			// error reply: they succeeded.
			return
		}
		replies, err := c.conn.Receive()
		if err != nil {
			var oe *netlink.OpError
			if errors.As(err, &oe) && oe.Sequence != 0 {
				if i, ok := pending[oe.Sequence]; ok {
					res[i].Err = c.opErr(&ops[i], err)
					delete(pending, oe.Sequence)
				}
				continue
			}
			// Socket-level failure (e.g. ENOBUFS): the remaining ACKs are lost.
			for _, i := range pending {
				res[i].Err = c.opErr(&ops[i], err)
			}
			return
		}
		for _, m := range replies {
			i, ok := pending[m.Header.Sequence]
			if !ok {
				continue
			}
			switch m.Header.Type {
			case netlink.Error:
				res[i].Warning = ackWarning(m)
				delete(pending, m.Header.Sequence)
			case rtmNewFilter:
				var f Filter
				if err := f.UnmarshalBinary(m.Data); err == nil {
					res[i].Filter = f
				}
			}
		}
	}
}

func (c *Client) opErr(op *Op, err error) error {
	return nlerr.Wrap(op.Kind.String(), c.devName(op.Filter.Ifindex), op.Filter.ID(), err)
}

// devName names an ifindex for error messages, looked up in the Client's
// network namespace.
func (c *Client) devName(ifindex int) string {
	rt, err := c.route()
	if err != nil {
		rt = nil // the calling thread's namespace
	}
	return netdev.NameIn(rt, ifindex)
}

// ackWarning returns NLMSGERR_ATTR_MSG of a successful ACK, if any. A
// success ACK carries the errno (0), the request's nlmsghdr and then the
// TLVs when NLM_F_ACK_TLVS is set.
func ackWarning(m netlink.Message) string {
	if m.Header.Flags&netlink.AcknowledgeTLVs == 0 || len(m.Data) < 4 {
		return ""
	}
	if binary.NativeEndian.Uint32(m.Data) != 0 {
		return ""
	}
	const off = 4 + 16
	if len(m.Data) <= off {
		return ""
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[off:])
	if err != nil {
		return ""
	}
	for ad.Next() {
		if ad.Type() == 1 { // NLMSGERR_ATTR_MSG
			return ad.String()
		}
	}
	return ""
}

// Add installs one filter (create, exclusive) and returns it as echoed by
// the kernel, with its handle.
func (c *Client) Add(f Filter) (Filter, error) {
	r := c.Batch([]Op{{Kind: OpAdd, Filter: f}}, BatchOptions{Echo: true})[0]
	return r.Filter, r.Err
}

// Replace creates or replaces one filter in place and returns the echo.
func (c *Client) Replace(f Filter) (Filter, error) {
	r := c.Batch([]Op{{Kind: OpReplace, Filter: f}}, BatchOptions{Echo: true})[0]
	return r.Filter, r.Err
}

// Delete removes one filter, selected by ifindex, parent, chain, prio,
// protocol and handle. A zero handle deletes the whole priority.
func (c *Client) Delete(f Filter) error {
	return c.Batch([]Op{{Kind: OpDelete, Filter: f}}, BatchOptions{})[0].Err
}

// DumpQuery selects filters to dump. Zero fields select everything.
type DumpQuery struct {
	Ifindex  int
	Parent   uint32 // ParentIngress when 0
	Chain    uint32
	AllChain bool // dump every chain instead of Chain only
	Prio     uint16
	Protocol uint16
	// Terse asks for handle, flags, action stats and cookie only
	// (TCA_DUMP_FLAGS_TERSE, Linux >= 5.8), cheaper for large tables.
	Terse bool
}

// Dump lists the flower filters of a device hook. Filters of other kinds
// (OVS's matchall policer, BPF) are skipped. A missing qdisc yields an empty
// list, not an error: use Qdisc to tell the two apart.
func (c *Client) Dump(q DumpQuery) ([]Filter, error) {
	probe := Filter{Ifindex: q.Ifindex, Parent: q.Parent, Prio: q.Prio, Protocol: q.Protocol}
	ae := netlink.NewAttributeEncoder()
	if !q.AllChain {
		ae.Uint32(tcaChain, q.Chain)
	}
	if q.Terse {
		// struct nla_bitfield32 { value, selector }: TCA_DUMP_FLAGS_TERSE.
		var bf [8]byte
		binary.NativeEndian.PutUint32(bf[0:], 1)
		binary.NativeEndian.PutUint32(bf[4:], 1)
		ae.Bytes(tcaDumpFlags, bf[:])
	}
	attrs, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	m := netlink.Message{
		Header: netlink.Header{Type: rtmGetFilter, Flags: netlink.Request | netlink.Dump},
		Data:   append(probe.header().append(nil), attrs...),
	}
	c.mu.Lock()
	replies, err := c.conn.Execute(m)
	c.mu.Unlock()
	if err != nil {
		return nil, nlerr.Wrap("dump", c.devName(q.Ifindex), "", err)
	}
	out := make([]Filter, 0, len(replies))
	for _, r := range replies {
		if r.Header.Type != rtmNewFilter {
			continue
		}
		var f Filter
		if err := f.UnmarshalBinary(r.Data); err != nil {
			if errors.Is(err, ErrNotFlower) {
				continue
			}
			return out, nlerr.Wrap("dump", c.devName(q.Ifindex), "", fmt.Errorf("decode: %w", err))
		}
		if f.Handle == 0 {
			// The chain-head entry of a priority carries no filter.
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

// Get reads back one filter selected like Delete.
func (c *Client) Get(sel Filter) (Filter, error) {
	data, err := sel.marshalSelector()
	if err != nil {
		return Filter{}, err
	}
	m := netlink.Message{Header: netlink.Header{Type: rtmGetFilter, Flags: netlink.Request}, Data: data}
	c.mu.Lock()
	replies, err := c.conn.Execute(m)
	c.mu.Unlock()
	if err != nil {
		return Filter{}, nlerr.Wrap("get", c.devName(sel.Ifindex), sel.ID(), err)
	}
	for _, r := range replies {
		if r.Header.Type == rtmNewFilter {
			var f Filter
			if err := f.UnmarshalBinary(r.Data); err != nil {
				return Filter{}, nlerr.Wrap("get", c.devName(sel.Ifindex), sel.ID(), fmt.Errorf("decode: %w", err))
			}
			return f, nil
		}
	}
	return Filter{}, nlerr.Wrap("get", c.devName(sel.Ifindex), sel.ID(), unix.ENOENT)
}
