package prm

// CQE64 (rdma-core providers/mlx5/mlx5dv.h struct mlx5_cqe64).
const (
	CQESize       = 64
	CQELog2Size   = 6
	CQEOffWQEID   = 0x02 // __be16 wqe_id (striding RQ)
	CQEOffRxHash  = 0x0c // __be32 rx_hash_result (Toeplitz)
	CQEOffHashTyp = 0x10 // u8 rx_hash_type
	CQEOffCsum    = 0x14 // __be16 check_sum
	CQEOffHdsIP   = 0x1c // u8 hds_ip_ext: L2/L3/L4_OK
	CQEOffL4L3    = 0x1d // u8 l4_hdr_type_etc
	CQEOffVLAN    = 0x1e // __be16 vlan_info
	CQEOffSrqn    = 0x20 // __be32 srqn_uidx
	CQEOffImm     = 0x24 // __be32 imm_inval_pkey
	CQEOffByteCnt = 0x2c // __be32 byte_cnt; compressed title: mini-CQE count
	CQEOffTstamp  = 0x30 // __be64 timestamp
	CQEOffSopQPN  = 0x38 // __be32 sop_drop_qpn: [23:0] flow tag on RX
	CQEOffWQECnt  = 0x3c // __be16 wqe_counter (start of the shared word)
	CQEOffSig     = 0x3e // u8 signature
	CQEOffOpOwn   = 0x3f // u8 op_own
	// Error CQE (struct mlx5_err_cqe).
	CQEOffVendorSynd = 0x36
	CQEOffSyndrome   = 0x37
	CQEOffErrQPN     = 0x38 // s_wqe_opcode_qpn
)

// CQE opcodes (op_own[7:4], mlx5dv.h enum MLX5_CQE_*).
const (
	CQEReq         = 0
	CQERespWrImm   = 1
	CQERespSend    = 2
	CQERespSendImm = 3
	CQERespSendInv = 4
	CQEResizeCQ    = 5
	CQENoPacket    = 6
	CQESigErr      = 12
	CQEReqErr      = 13
	CQERespErr     = 14
	CQEInvalid     = 15
)

// op_own bits.
const (
	OwnerMask      = 0x01 // MLX5_CQE_OWNER_MASK
	SEMask         = 0x02
	FormatShift    = 2
	FormatMask     = 0x0c
	FormatPlain    = 0 // no inline data
	FormatCompress = 3 // title of a compressed session
	OpcodeShift    = 4
	// OpOwnInvalid is what rdma-core writes into every CQE at allocation
	// (cq.c mlx5_alloc_cq_buf): opcode INVALID, owner 0.
	OpOwnInvalid = CQEInvalid << OpcodeShift
	// OpOwnRespSend and OpOwnTitle are VPP's two fast-path values of
	// op_own&0xfc (input.c rdma_device_poll_cq_mlx5dv).
	OpOwnRespSend = CQERespSend << OpcodeShift
	OpOwnTitle    = CQERespSend<<OpcodeShift | FormatCompress<<FormatShift
)

// hds_ip_ext bits (mlx5dv.h MLX5_CQE_L2_OK...).
const (
	CQEL2OK = 1 << 0
	CQEL3OK = 1 << 1
	CQEL4OK = 1 << 2
)

// l4_hdr_type_etc (CQE byte 0x1d): bit7 ip_frag, [6:4] L4 type, [3:2] L3
// type, bit0 VLAN stripped (Linux include/linux/mlx5/device.h).
const (
	CQEIPFrag      = 1 << 7
	CQEL4Shift     = 4
	CQEL4Mask      = 0x70
	CQEL3Shift     = 2
	CQEL3Mask      = 0x0c
	CQEVLANStrip   = 1 << 0
	CQEL4None      = 0
	CQEL4TCP       = 1
	CQEL4UDP       = 2
	CQEL4TCPAckNo  = 3
	CQEL4TCPAckDat = 4
	CQEL3None      = 0
	CQEL3IPv6      = 1
	CQEL3IPv4      = 2
)

// FlowTagMask selects the flow tag in sop_drop_qpn (rdma-core
// MLX5_FLOW_TAG_MASK).
const FlowTagMask = 0x00ffffff

// CQE error syndromes (mlx5dv.h MLX5_CQE_SYNDROME_*).
const (
	SyndLocalLength = 0x01
	SyndLocalQPOp   = 0x02
	SyndLocalProt   = 0x04
	SyndWRFlush     = 0x05
)

// Mini-CQE (8 bytes, eight to a 64-byte slot; DPDK mlx5_prm.h struct
// mlx5_mini_cqe8; not in rdma-core's public headers). HASH format.
const (
	MiniCQESize     = 8
	MiniPerSlot     = CQESize / MiniCQESize
	MiniOffRxHash   = 0      // __be32 rx_hash_result (HASH format)
	MiniOffCsum     = 0      // __be16 checksum (CSUM formats)
	MiniOffByteCnt  = 4      // __be32 byte_cnt
	ResFormatHash   = 1 << 0 // MLX5DV_CQE_RES_FORMAT_HASH
	ResFormatCsum   = 1 << 1
	ResFormatStridx = 1 << 2
)

// MiniArraySlot returns the CQ index, relative to the title at 0, of the
// slot holding mini-CQE array j (mini-CQEs 8j..8j+7): array 0 sits right
// after the title, array j≥1 at 8j (DPDK drivers/net/mlx5/mlx5_rx.c
// mlx5_rx_poll_len, VPP src/plugins/rdma/input.c process_mini_cqes).
func MiniArraySlot(j uint32) uint32 {
	if j == 0 {
		return 1
	}
	return 8 * j
}

// CQ doorbell record (mlx5.h MLX5_CQ_SET_CI / MLX5_CQ_ARM_DB).
const (
	CQDBRSetCI   = 0 // byte offset of the consumer index (BE32, 24 bits)
	CQDBRArm     = 4
	CQDBRSize    = 8
	CQCIMask     = 0x00ffffff
	RQDBROff     = 0 * 4 // MLX5_RCV_DBR
	SQDBROff     = 1 * 4 // MLX5_SND_DBR
	QPDBRSize    = 8
	WQCounterMsk = 0xffff
)

// Receive WQE data segment (struct mlx5_wqe_data_seg).
const (
	DataSegSize     = 16
	DataSegOffCount = 0 // __be32 byte_count
	DataSegOffLKey  = 4 // __be32 lkey
	DataSegOffAddr  = 8 // __be64 addr
	// InvalidLKey ends a short scatter list (mlx5dv.h MLX5_INVALID_LKEY).
	InvalidLKey = 0x100
)

// Send WQE (rdma-core mlx5dv.h): one 64-byte basic block holds
// ctrl (16) + eth (32, 18 bytes of inline L2 header) + one data segment.
const (
	SendWQEBB      = 64 // MLX5_SEND_WQE_BB
	SendWQEShift   = 6  // MLX5_SEND_WQE_SHIFT
	CtrlSegSize    = 16
	CtrlOffOpIdx   = 0  // __be32 opmod_idx_opcode: [31:24] opmod, [23:8] wqe index, [7:0] opcode
	CtrlOffQPNDS   = 4  // __be32 qpn_ds: [31:8] qpn, [5:0] ds (16-byte units)
	CtrlOffSig     = 8  // u8 signature
	CtrlOffStream  = 9  // __be16 dci_stream_channel_id
	CtrlOffFmCeSe  = 11 // u8 fm_ce_se
	CtrlOffImm     = 12 // __be32 imm
	EthSegSize     = 32
	EthOffCsFlags  = 4  // u8 cs_flags
	EthOffMSS      = 6  // __be16 mss
	EthOffInlSz    = 12 // __be16 inline_hdr_sz
	EthOffInlStart = 14 // inline_hdr_start[2] then inline_hdr[16]
	// EthInlineSize is the L2 header inlined into the eth segment
	// (rdma-core MLX5_ETH_L2_INLINE_HEADER_SIZE: 14 + 4 for one VLAN tag).
	EthInlineSize = 18
	// SendDS is the WQE size in 16-byte units: ctrl + eth + data.
	SendDS = (CtrlSegSize + EthSegSize + DataSegSize) / 16
	// OpcodeSend is MLX5_OPCODE_SEND; OpcodeNOP MLX5_OPCODE_NOP.
	OpcodeSend = 0x0a
	OpcodeNOP  = 0x00
	// CtrlCQUpdate asks for a completion (MLX5_WQE_CTRL_CQ_UPDATE).
	CtrlCQUpdate = 2 << 2
	// EthL3Csum / EthL4Csum ask the NIC to fill checksums.
	EthL3Csum = 1 << 6
	EthL4Csum = 1 << 7
)

// BlueFlame: rdma-core alternates between two halves of a UAR BlueFlame
// register (bf->offset ^= bf->buf_size), each bfSize bytes.
const (
	BFDefaultSize = 256
	UARSize       = 2 * BFDefaultSize
)
