//go:build mlx5 && cgo

package verbs

/*
#cgo LDFLAGS: -libverbs -lmlx5
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

// Shims for the static-inline verbs (rdma-core libibverbs/verbs.h and
// providers/mlx5/mlx5dv.h declare them static inline): each is a
// few lines so the Go side never copies the verbs_context op table.

static struct ibv_context *sd_open(const char *name, int *err) {
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l) { *err = errno; return NULL; }
	struct ibv_context *ctx = NULL;
	*err = ENODEV;
	for (int i = 0; i < n; i++) {
		if (strcmp(ibv_get_device_name(l[i]), name) == 0) {
			ctx = ibv_open_device(l[i]);
			*err = ctx ? 0 : errno;
			break;
		}
	}
	ibv_free_device_list(l);
	return ctx;
}

static int sd_query(struct ibv_context *ctx, uint64_t *flags, uint32_t *formats) {
	struct mlx5dv_context a;
	memset(&a, 0, sizeof a);
	a.comp_mask = MLX5DV_CONTEXT_MASK_CQE_COMPRESION;
	int r = mlx5dv_query_device(ctx, &a);
	*flags = a.flags;
	*formats = a.cqe_comp_caps.supported_format;
	return r;
}

static struct ibv_mr *sd_reg_mr(struct ibv_pd *pd, uintptr_t addr, size_t len, int *err) {
	struct ibv_mr *mr = ibv_reg_mr(pd, (void *)addr, len, IBV_ACCESS_LOCAL_WRITE);
	if (!mr) *err = errno;
	return mr;
}

static struct ibv_cq *sd_create_cq(struct ibv_context *ctx, int cqe, int compress, int *err) {
	struct ibv_cq_init_attr_ex ca;
	memset(&ca, 0, sizeof ca);
	ca.cqe = cqe;
	struct mlx5dv_cq_init_attr dv;
	memset(&dv, 0, sizeof dv);
	dv.comp_mask = MLX5DV_CQ_INIT_ATTR_MASK_CQE_SIZE;
	dv.cqe_size = 64;
	if (compress) {
		dv.comp_mask |= MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE;
		dv.cqe_comp_res_format = MLX5DV_CQE_RES_FORMAT_HASH;
	}
	struct ibv_cq_ex *cq = mlx5dv_create_cq(ctx, &ca, &dv);
	if (!cq) { *err = errno; return NULL; }
	return ibv_cq_ex_to_cq(cq);
}

static struct ibv_wq *sd_create_wq(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, uint32_t n, int *err) {
	struct ibv_wq_init_attr a;
	memset(&a, 0, sizeof a);
	a.wq_type = IBV_WQT_RQ;
	a.max_wr = n;
	a.max_sge = 1;
	a.pd = pd;
	a.cq = cq;
	struct ibv_wq *wq = ibv_create_wq(ctx, &a);
	if (!wq) { *err = errno; return NULL; }
	// RESET -> RDY zeroes the doorbell record and indices (verbs.c
	// mlx5_modify_wq); WQEs are posted only after this.
	struct ibv_wq_attr m;
	memset(&m, 0, sizeof m);
	m.attr_mask = IBV_WQ_ATTR_STATE;
	m.wq_state = IBV_WQS_RDY;
	int r = ibv_modify_wq(wq, &m);
	if (r) { *err = r; ibv_destroy_wq(wq); return NULL; }
	return wq;
}

static struct ibv_rwq_ind_table *sd_create_ind(struct ibv_context *ctx, struct ibv_wq **wqs, uint32_t log, int *err) {
	struct ibv_rwq_ind_table_init_attr a;
	memset(&a, 0, sizeof a);
	a.log_ind_tbl_size = log;
	a.ind_tbl = wqs;
	struct ibv_rwq_ind_table *t = ibv_create_rwq_ind_table(ctx, &a);
	if (!t) *err = errno;
	return t;
}

// The Toeplitz key from Microsoft's RSS specification (also nicemu's).
static uint8_t sd_rss_key[40] = {
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
	0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
	0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
	0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

static struct ibv_qp *sd_create_rss_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_rwq_ind_table *ind, int v6, int *err) {
	struct ibv_qp_init_attr_ex a;
	memset(&a, 0, sizeof a);
	a.qp_type = IBV_QPT_RAW_PACKET;
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
	a.pd = pd;
	a.rwq_ind_tbl = ind;
	a.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
	a.rx_hash_conf.rx_hash_key_len = sizeof sd_rss_key;
	a.rx_hash_conf.rx_hash_key = sd_rss_key;
	a.rx_hash_conf.rx_hash_fields_mask = v6 ? (IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6)
	                                        : (IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4);
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &a);
	if (!qp) *err = errno;
	return qp;
}

struct sd_flow {
	struct ibv_flow_attr attr;
	struct ibv_flow_spec_eth eth;
	struct ibv_flow_spec_action_tag tag;
};

static struct ibv_flow *sd_create_flow(struct ibv_qp *qp, const uint8_t *mac, int match_mac, uint16_t ethertype,
                                       uint16_t prio, uint32_t tag, int *err) {
	struct sd_flow f;
	memset(&f, 0, sizeof f);
	f.attr.type = IBV_FLOW_ATTR_NORMAL;
	f.attr.size = sizeof f.attr + sizeof f.eth;
	f.attr.num_of_specs = 1;
	f.attr.port = 1;
	f.attr.priority = prio;
	f.eth.type = IBV_FLOW_SPEC_ETH;
	f.eth.size = sizeof f.eth;
	if (match_mac) {
		memcpy(f.eth.val.dst_mac, mac, 6);
		memset(f.eth.mask.dst_mac, 0xff, 6);
	}
	if (ethertype) {
		f.eth.val.ether_type = htons(ethertype);
		f.eth.mask.ether_type = 0xffff;
	}
	if (tag) {
		f.tag.type = IBV_FLOW_SPEC_ACTION_TAG;
		f.tag.size = sizeof f.tag;
		f.tag.tag_id = tag;
		f.attr.size += sizeof f.tag;
		f.attr.num_of_specs = 2;
	}
	struct ibv_flow *fl = ibv_create_flow(qp, &f.attr);
	if (!fl) *err = errno;
	return fl;
}

static struct ibv_qp *sd_create_tx_qp(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, uint32_t n, int *err) {
	struct ibv_qp_init_attr_ex a;
	memset(&a, 0, sizeof a);
	a.qp_type = IBV_QPT_RAW_PACKET;
	a.send_cq = cq;
	a.recv_cq = cq;
	a.cap.max_send_wr = n;
	a.cap.max_send_sge = 1;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = pd;
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &a);
	if (!qp) { *err = errno; return NULL; }
	struct ibv_qp_attr m;
	memset(&m, 0, sizeof m);
	m.qp_state = IBV_QPS_INIT;
	m.port_num = 1;
	int r = ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PORT);
	if (!r) { m.qp_state = IBV_QPS_RTR; r = ibv_modify_qp(qp, &m, IBV_QP_STATE); }
	if (!r) { m.qp_state = IBV_QPS_RTS; r = ibv_modify_qp(qp, &m, IBV_QP_STATE); }
	if (r) { *err = r; ibv_destroy_qp(qp); return NULL; }
	return qp;
}

static int sd_init_rx(struct ibv_cq *cq, struct ibv_wq *wq, struct mlx5dv_cq *dcq, struct mlx5dv_rwq *dwq) {
	struct mlx5dv_obj o;
	memset(&o, 0, sizeof o);
	o.cq.in = cq;
	o.cq.out = dcq;
	o.rwq.in = wq;
	o.rwq.out = dwq;
	return mlx5dv_init_obj(&o, MLX5DV_OBJ_CQ | MLX5DV_OBJ_RWQ);
}

static int sd_init_tx(struct ibv_qp *qp, struct ibv_cq *cq, struct mlx5dv_qp *dqp, struct mlx5dv_cq *dcq) {
	struct mlx5dv_obj o;
	memset(&o, 0, sizeof o);
	o.qp.in = qp;
	o.qp.out = dqp;
	o.cq.in = cq;
	o.cq.out = dcq;
	return mlx5dv_init_obj(&o, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ);
}

static int sd_destroy_wq(struct ibv_wq *wq) { return ibv_destroy_wq(wq); }
static int sd_destroy_ind(struct ibv_rwq_ind_table *t) { return ibv_destroy_rwq_ind_table(t); }
static int sd_destroy_flow(struct ibv_flow *f) { return ibv_destroy_flow(f); }
*/
import "C"

import (
	"errors"
	"fmt"
	"math/bits"
	"net"
	"syscall"
	"unsafe"

	"github.com/scrubd/scrubd/swpath/dv/prm"
)

// Error is a failed verbs call: the operation, the device and the errno
// rdma-core left.
type Error struct {
	Op    string
	Dev   string
	Errno syscall.Errno
}

func (e *Error) Error() string { return fmt.Sprintf("verbs: %s on %s: %v", e.Op, e.Dev, e.Errno) }

// Unwrap returns the errno, so errors.Is(err, syscall.EPERM) works.
func (e *Error) Unwrap() error { return e.Errno }

// Device is an open RDMA device with one protection domain.
type Device struct {
	Name string
	// CQEv1 reports MLX5DV_CONTEXT_FLAGS_CQE_V1, which VPP requires for DV
	// mode; CompressFormats is cqe_comp_caps.supported_format.
	CQEv1           bool
	CompressFormats uint32
	ctx             *C.struct_ibv_context
	pd              *C.struct_ibv_pd
	mrs             []*C.struct_ibv_mr
}

// Open opens the RDMA device by name (see DeviceForNetdev) and allocates
// its protection domain.
func Open(name string) (*Device, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var e C.int
	ctx := C.sd_open(cs, &e)
	if ctx == nil {
		return nil, &Error{"ibv_open_device", name, syscall.Errno(e)}
	}
	d := &Device{Name: name, ctx: ctx}
	var flags C.uint64_t
	var formats C.uint32_t
	if r := C.sd_query(ctx, &flags, &formats); r != 0 {
		C.ibv_close_device(ctx)
		return nil, &Error{"mlx5dv_query_device", name, syscall.Errno(r)}
	}
	d.CQEv1 = flags&C.MLX5DV_CONTEXT_FLAGS_CQE_V1 != 0
	d.CompressFormats = uint32(formats)
	if d.pd = C.ibv_alloc_pd(ctx); d.pd == nil {
		C.ibv_close_device(ctx)
		return nil, &Error{"ibv_alloc_pd", name, syscall.ENOMEM}
	}
	return d, nil
}

// RegisterArena registers mem (a pool node's arena: mmap'd, outside the
// Go heap, never moved) as one memory region and returns its lkey, as VPP
// registers its whole buffer memory once.
func (d *Device) RegisterArena(mem []byte) (uint32, error) {
	if len(mem) == 0 {
		return 0, errors.New("verbs: RegisterArena: empty arena")
	}
	var e C.int
	mr := C.sd_reg_mr(d.pd, C.uintptr_t(prm.Addr(mem)), C.size_t(len(mem)), &e)
	if mr == nil {
		return 0, &Error{"ibv_reg_mr", d.Name, syscall.Errno(e)}
	}
	d.mrs = append(d.mrs, mr)
	return uint32(mr.lkey), nil
}

// Close deregisters the arenas and closes the device. Close Rx and Tx
// sets first.
func (d *Device) Close() error {
	var errs []error
	for _, mr := range d.mrs {
		if r := C.ibv_dereg_mr(mr); r != 0 {
			errs = append(errs, &Error{"ibv_dereg_mr", d.Name, syscall.Errno(r)})
		}
	}
	d.mrs = nil
	if d.pd != nil {
		if r := C.ibv_dealloc_pd(d.pd); r != 0 {
			errs = append(errs, &Error{"ibv_dealloc_pd", d.Name, syscall.Errno(r)})
		}
		d.pd = nil
	}
	if d.ctx != nil {
		if r := C.ibv_close_device(d.ctx); r != 0 {
			errs = append(errs, &Error{"ibv_close_device", d.Name, syscall.Errno(r)})
		}
		d.ctx = nil
	}
	return errors.Join(errs...)
}

// RxConfig describes the receive side of one port.
type RxConfig struct {
	// Queues is the number of receive WQs (one per worker), a power of 2
	// (the indirection table size must be one).
	Queues int
	// Log2 is log2 of the WQEs per WQ; the CQ gets twice as many entries
	// (rdma-core rounds cqe+1 up to a power of 2).
	Log2 uint
	// Compress asks for compressed CQEs with the HASH mini-CQE format.
	Compress bool
	// MAC steers frames for this destination MAC; nil steers everything
	// (promiscuous, all-zero masks).
	MAC net.HardwareAddr
	// FlowTag, if non-zero, is put into every CQE by the steering rules.
	FlowTag uint32
}

// Rx is the receive side: one CQ and WQ per queue, the RSS table, the
// IPv4 and IPv6 RSS QPs and the steering rules. Rings[i] is queue i's
// memory for dv.NewRxQueue.
type Rx struct {
	Rings []*prm.RxRings
	dev   *Device
	cqs   []*C.struct_ibv_cq
	wqs   []*C.struct_ibv_wq
	ind   *C.struct_ibv_rwq_ind_table
	qps   []*C.struct_ibv_qp
	flows []*C.struct_ibv_flow
}

// CreateRx creates the receive side (VPP rdma_rxq_init, then
// rdma_rxq_finalize and rdma_dev_set_ucast/promisc). Create the send
// queues first: otherwise the receive rules catch what this host sends
// (VPP device.c).
func (d *Device) CreateRx(cfg RxConfig) (rx *Rx, err error) {
	if cfg.Queues <= 0 || cfg.Queues&(cfg.Queues-1) != 0 {
		return nil, fmt.Errorf("verbs: RxConfig.Queues = %d: want a power of 2", cfg.Queues)
	}
	if cfg.Log2 < 3 || cfg.Log2 > 15 {
		return nil, fmt.Errorf("verbs: RxConfig.Log2 = %d: want 3..15", cfg.Log2)
	}
	if cfg.MAC != nil && len(cfg.MAC) != 6 {
		return nil, fmt.Errorf("verbs: RxConfig.MAC = %v: want 6 bytes", cfg.MAC)
	}
	rx = &Rx{dev: d}
	defer func() {
		if err != nil {
			rx.Close()
		}
	}()
	var e C.int
	for i := 0; i < cfg.Queues; i++ {
		cq := C.sd_create_cq(d.ctx, C.int(1)<<cfg.Log2, boolInt(cfg.Compress), &e)
		if cq == nil {
			return nil, &Error{"mlx5dv_create_cq", d.Name, syscall.Errno(e)}
		}
		rx.cqs = append(rx.cqs, cq)
		wq := C.sd_create_wq(d.ctx, d.pd, cq, C.uint32_t(1)<<cfg.Log2, &e)
		if wq == nil {
			return nil, &Error{"ibv_create_wq/modify RDY", d.Name, syscall.Errno(e)}
		}
		rx.wqs = append(rx.wqs, wq)
		var dcq C.struct_mlx5dv_cq
		var dwq C.struct_mlx5dv_rwq
		if r := C.sd_init_rx(cq, wq, &dcq, &dwq); r != 0 {
			return nil, &Error{"mlx5dv_init_obj(CQ|RWQ)", d.Name, syscall.Errno(r)}
		}
		rings, err := rxRings(&dcq, &dwq)
		if err != nil {
			return nil, fmt.Errorf("verbs: %s queue %d: %w", d.Name, i, err)
		}
		rx.Rings = append(rx.Rings, rings)
	}
	wqs := make([]*C.struct_ibv_wq, len(rx.wqs))
	copy(wqs, rx.wqs)
	rx.ind = C.sd_create_ind(d.ctx, &wqs[0], C.uint32_t(bits.TrailingZeros(uint(cfg.Queues))), &e)
	if rx.ind == nil {
		return nil, &Error{"ibv_create_rwq_ind_table", d.Name, syscall.Errno(e)}
	}
	for v6 := 0; v6 < 2; v6++ {
		qp := C.sd_create_rss_qp(d.ctx, d.pd, rx.ind, C.int(v6), &e)
		if qp == nil {
			return nil, &Error{"ibv_create_qp_ex(RSS)", d.Name, syscall.Errno(e)}
		}
		rx.qps = append(rx.qps, qp)
	}
	var mac [6]C.uint8_t
	for i, b := range cfg.MAC {
		mac[i] = C.uint8_t(b)
	}
	// IPv6 to the IPv6-hashing QP first (priority 0), everything else to
	// the IPv4 one (priority 1).
	for _, r := range []struct {
		qp    *C.struct_ibv_qp
		etype C.uint16_t
		prio  C.uint16_t
	}{{rx.qps[1], 0x86dd, 0}, {rx.qps[0], 0, 1}} {
		fl := C.sd_create_flow(r.qp, &mac[0], boolInt(cfg.MAC != nil), r.etype, r.prio, C.uint32_t(cfg.FlowTag), &e)
		if fl == nil {
			return nil, &Error{"ibv_create_flow", d.Name, syscall.Errno(e)}
		}
		rx.flows = append(rx.flows, fl)
	}
	return rx, nil
}

// rxRings validates what mlx5dv_init_obj returned (rdma-core
// providers/mlx5/mlx5dv.h struct mlx5dv_cq, struct mlx5dv_rwq) and wraps
// it as prm.RxRings.
func rxRings(cq *C.struct_mlx5dv_cq, wq *C.struct_mlx5dv_rwq) (*prm.RxRings, error) {
	n, sz := int(cq.cqe_cnt), int(cq.cqe_size)
	if sz != prm.CQESize || n&(n-1) != 0 || n == 0 {
		return nil, fmt.Errorf("CQ of %d entries of %d bytes: want a power of 2 of 64-byte CQEs", n, sz)
	}
	wn, stride := int(wq.wqe_cnt), int(wq.stride)
	if wn&(wn-1) != 0 || wn == 0 || stride != prm.DataSegSize {
		return nil, fmt.Errorf("RWQ of %d WQEs of stride %d: want a power of 2, stride 16", wn, stride)
	}
	return &prm.RxRings{
		CQ:       unsafe.Slice((*byte)(cq.buf), n*sz),
		CQLog2:   uint(bits.TrailingZeros(uint(n))),
		CQDBR:    unsafe.Slice((*byte)(unsafe.Pointer(cq.dbrec)), prm.CQDBRSize),
		RQ:       unsafe.Slice((*byte)(wq.buf), wn*stride),
		RQLog2:   uint(bits.TrailingZeros(uint(wn))),
		RQStride: stride,
		RQDBR:    unsafe.Slice((*byte)(unsafe.Pointer(wq.dbrec)), 4),
	}, nil
}

// Close destroys the receive side in reverse order of creation.
func (rx *Rx) Close() error {
	var errs []error
	name := rx.dev.Name
	for _, f := range rx.flows {
		if r := C.sd_destroy_flow(f); r != 0 {
			errs = append(errs, &Error{"ibv_destroy_flow", name, syscall.Errno(r)})
		}
	}
	for _, qp := range rx.qps {
		if r := C.ibv_destroy_qp(qp); r != 0 {
			errs = append(errs, &Error{"ibv_destroy_qp", name, syscall.Errno(r)})
		}
	}
	if rx.ind != nil {
		if r := C.sd_destroy_ind(rx.ind); r != 0 {
			errs = append(errs, &Error{"ibv_destroy_rwq_ind_table", name, syscall.Errno(r)})
		}
	}
	for _, wq := range rx.wqs {
		if r := C.sd_destroy_wq(wq); r != 0 {
			errs = append(errs, &Error{"ibv_destroy_wq", name, syscall.Errno(r)})
		}
	}
	for _, cq := range rx.cqs {
		if r := C.ibv_destroy_cq(cq); r != 0 {
			errs = append(errs, &Error{"ibv_destroy_cq", name, syscall.Errno(r)})
		}
	}
	*rx = Rx{dev: rx.dev}
	return errors.Join(errs...)
}

// Tx is one raw-packet send queue with its CQ. Rings is its memory for
// dv.NewTxQueue.
type Tx struct {
	Rings *prm.TxRings
	dev   *Device
	qp    *C.struct_ibv_qp
	cq    *C.struct_ibv_cq
}

// CreateTx creates a send queue of 2^log2 WQEs and a CQ at least as
// large, moves the QP to RTS on port 1, and maps its rings.
func (d *Device) CreateTx(log2 uint) (tx *Tx, err error) {
	if log2 < 3 || log2 > 15 {
		return nil, fmt.Errorf("verbs: CreateTx log2 = %d: want 3..15", log2)
	}
	tx = &Tx{dev: d}
	defer func() {
		if err != nil {
			tx.Close()
		}
	}()
	var e C.int
	if tx.cq = C.sd_create_cq(d.ctx, C.int(1)<<log2, 0, &e); tx.cq == nil {
		return nil, &Error{"mlx5dv_create_cq(send)", d.Name, syscall.Errno(e)}
	}
	if tx.qp = C.sd_create_tx_qp(d.ctx, d.pd, tx.cq, C.uint32_t(1)<<log2, &e); tx.qp == nil {
		return nil, &Error{"ibv_create_qp_ex(raw packet)/modify RTS", d.Name, syscall.Errno(e)}
	}
	var dqp C.struct_mlx5dv_qp
	var dcq C.struct_mlx5dv_cq
	if r := C.sd_init_tx(tx.qp, tx.cq, &dqp, &dcq); r != 0 {
		return nil, &Error{"mlx5dv_init_obj(QP|CQ)", d.Name, syscall.Errno(r)}
	}
	sn, stride := int(dqp.sq.wqe_cnt), int(dqp.sq.stride)
	if sn == 0 || sn&(sn-1) != 0 || stride != prm.SendWQEBB {
		return nil, fmt.Errorf("verbs: %s: SQ of %d WQEs of stride %d: want a power of 2 of 64 bytes", d.Name, sn, stride)
	}
	n := int(dcq.cqe_cnt)
	if int(dcq.cqe_size) != prm.CQESize || n == 0 || n&(n-1) != 0 {
		return nil, fmt.Errorf("verbs: %s: send CQ of %d entries of %d bytes", d.Name, n, int(dcq.cqe_size))
	}
	bf := int(dqp.bf.size)
	tx.Rings = &prm.TxRings{
		SQ:     unsafe.Slice((*byte)(dqp.sq.buf), sn*stride),
		SQLog2: uint(bits.TrailingZeros(uint(sn))),
		QPDBR:  unsafe.Slice((*byte)(unsafe.Pointer(dqp.dbrec)), prm.QPDBRSize),
		UAR:    unsafe.Slice((*byte)(dqp.bf.reg), max(8, 2*bf)),
		BFSize: bf,
		QPN:    uint32(tx.qp.qp_num),
		CQ:     unsafe.Slice((*byte)(dcq.buf), n*prm.CQESize),
		CQLog2: uint(bits.TrailingZeros(uint(n))),
		CQDBR:  unsafe.Slice((*byte)(unsafe.Pointer(dcq.dbrec)), prm.CQDBRSize),
	}
	if err := tx.Rings.Validate(); err != nil {
		return nil, err
	}
	return tx, nil
}

// Close destroys the QP and its CQ.
func (tx *Tx) Close() error {
	var errs []error
	if tx.qp != nil {
		if r := C.ibv_destroy_qp(tx.qp); r != 0 {
			errs = append(errs, &Error{"ibv_destroy_qp", tx.dev.Name, syscall.Errno(r)})
		}
	}
	if tx.cq != nil {
		if r := C.ibv_destroy_cq(tx.cq); r != 0 {
			errs = append(errs, &Error{"ibv_destroy_cq", tx.dev.Name, syscall.Errno(r)})
		}
	}
	*tx = Tx{dev: tx.dev}
	return errors.Join(errs...)
}

func boolInt(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
