package prm

import "fmt"

// RxRings is the memory of one receive queue as mlx5dv_init_obj describes
// it (struct mlx5dv_cq and struct mlx5dv_rwq): a CQ of 2^CQLog2 64-byte
// entries with its doorbell record, and a cyclic RQ of 2^RQLog2 WQEs of
// RQStride bytes with its doorbell record.
type RxRings struct {
	CQ       []byte
	CQLog2   uint
	CQDBR    []byte // 8 bytes: SET_CI, ARM_DB
	RQ       []byte
	RQLog2   uint
	RQStride int    // bytes per WQE: 16 × max_sge, a power of 2
	RQDBR    []byte // 4 bytes at least: MLX5_RCV_DBR
}

// TxRings is the memory of one send queue: a raw-packet SQ of 2^SQLog2
// 64-byte basic blocks, the QP doorbell record (MLX5_SND_DBR at offset 4),
// the UAR BlueFlame register the doorbell is rung on, and its send CQ.
type TxRings struct {
	SQ     []byte
	SQLog2 uint
	QPDBR  []byte // 8 bytes: RCV, SND
	UAR    []byte // two BlueFlame halves (at least 8 bytes)
	BFSize int    // bytes per BlueFlame half (bf->buf_size); 0: no BlueFlame
	QPN    uint32
	CQ     []byte
	CQLog2 uint
	CQDBR  []byte
}

// RingError reports a ring geometry that cannot work.
type RingError struct {
	Field string
	Value int
	Want  string
}

func (e *RingError) Error() string {
	return fmt.Sprintf("prm: ring %s = %d: want %s", e.Field, e.Value, e.Want)
}

// Validate checks sizes and alignment against the geometry fields.
func (r *RxRings) Validate() error {
	switch {
	case r.CQLog2 < 1 || r.CQLog2 > 22:
		return &RingError{"CQLog2", int(r.CQLog2), "1..22"}
	case len(r.CQ) != CQESize<<r.CQLog2:
		return &RingError{"len(CQ)", len(r.CQ), fmt.Sprint(CQESize << r.CQLog2)}
	case len(r.CQDBR) < CQDBRSize || Addr(r.CQDBR)&7 != 0:
		return &RingError{"len(CQDBR)", len(r.CQDBR), "8, 8-byte aligned"}
	case r.RQLog2 < 3 || r.RQLog2 > 15:
		return &RingError{"RQLog2", int(r.RQLog2), "3..15 (a 16-bit WQE counter)"}
	case r.RQStride < DataSegSize || r.RQStride&(r.RQStride-1) != 0:
		return &RingError{"RQStride", r.RQStride, "a power of 2 >= 16"}
	case len(r.RQ) != r.RQStride<<r.RQLog2:
		return &RingError{"len(RQ)", len(r.RQ), fmt.Sprint(r.RQStride << r.RQLog2)}
	case len(r.RQDBR) < 4 || Addr(r.RQDBR)&3 != 0:
		return &RingError{"len(RQDBR)", len(r.RQDBR), "4, 4-byte aligned"}
	case Addr(r.CQ)&63 != 0:
		return &RingError{"CQ address % 64", int(Addr(r.CQ) & 63), "0"}
	}
	return nil
}

// Validate checks sizes and alignment against the geometry fields.
func (r *TxRings) Validate() error {
	switch {
	case r.SQLog2 < 3 || r.SQLog2 > 15:
		return &RingError{"SQLog2", int(r.SQLog2), "3..15"}
	case len(r.SQ) != SendWQEBB<<r.SQLog2:
		return &RingError{"len(SQ)", len(r.SQ), fmt.Sprint(SendWQEBB << r.SQLog2)}
	case len(r.QPDBR) < QPDBRSize || Addr(r.QPDBR)&7 != 0:
		return &RingError{"len(QPDBR)", len(r.QPDBR), "8, 8-byte aligned"}
	case r.BFSize < 0 || len(r.UAR) < max(8, 2*r.BFSize) || Addr(r.UAR)&7 != 0:
		// BFSize 0: no BlueFlame, the doorbell is always at offset 0.
		return &RingError{"len(UAR)", len(r.UAR), fmt.Sprintf("max(8, 2*BFSize (%d)), 8-byte aligned", 2*r.BFSize)}
	case r.CQLog2 < 1 || r.CQLog2 > 22:
		return &RingError{"CQLog2", int(r.CQLog2), "1..22"}
	case len(r.CQ) != CQESize<<r.CQLog2:
		return &RingError{"len(CQ)", len(r.CQ), fmt.Sprint(CQESize << r.CQLog2)}
	case len(r.CQDBR) < CQDBRSize || Addr(r.CQDBR)&7 != 0:
		return &RingError{"len(CQDBR)", len(r.CQDBR), "8, 8-byte aligned"}
	case r.QPN > 0xffffff:
		return &RingError{"QPN", int(r.QPN), "24 bits"}
	}
	return nil
}

// NewRxRings allocates receive rings in Go memory for the emulator and
// tests, with every CQE initialised the way rdma-core leaves them
// (op_own = 0xF0, cq.c mlx5_alloc_cq_buf). One data segment per WQE.
func NewRxRings(cqLog2, rqLog2 uint) *RxRings {
	r := &RxRings{
		CQ: Alloc(CQESize << cqLog2), CQLog2: cqLog2, CQDBR: Alloc(CQDBRSize),
		RQ: Alloc(DataSegSize << rqLog2), RQLog2: rqLog2, RQStride: DataSegSize, RQDBR: Alloc(8),
	}
	InitCQ(r.CQ)
	return r
}

// NewTxRings allocates send rings in Go memory for the emulator and tests.
func NewTxRings(sqLog2, cqLog2 uint, qpn uint32) *TxRings {
	r := &TxRings{
		SQ: Alloc(SendWQEBB << sqLog2), SQLog2: sqLog2, QPDBR: Alloc(QPDBRSize),
		UAR: Alloc(UARSize), BFSize: BFDefaultSize, QPN: qpn,
		CQ: Alloc(CQESize << cqLog2), CQLog2: cqLog2, CQDBR: Alloc(CQDBRSize),
	}
	InitCQ(r.CQ)
	return r
}

// InitCQ writes op_own = 0xF0 (opcode INVALID, owner 0) into every CQE.
func InitCQ(cq []byte) {
	for off := 0; off+CQESize <= len(cq); off += CQESize {
		StoreWord(cq, off+CQEOffWQECnt, MakeOwnerWord(0, OpOwnInvalid))
	}
}
