//go:build mlx5 && cgo

package verbs

/*
#include <stddef.h>
#include <infiniband/mlx5dv.h>

#define SZ(t, f) sizeof(((t *)0)->f)

enum {
	CQE_SIZE       = sizeof(struct mlx5_cqe64),
	CQE_WQE_ID     = offsetof(struct mlx5_cqe64, wqe_id),
	CQE_HDS_IP     = offsetof(struct mlx5_cqe64, hds_ip_ext),
	CQE_L4L3       = offsetof(struct mlx5_cqe64, l4_hdr_type_etc),
	CQE_VLAN       = offsetof(struct mlx5_cqe64, vlan_info),
	CQE_SRQN       = offsetof(struct mlx5_cqe64, srqn_uidx),
	CQE_IMM        = offsetof(struct mlx5_cqe64, imm_inval_pkey),
	CQE_BYTE_CNT   = offsetof(struct mlx5_cqe64, byte_cnt),
	CQE_TSTAMP     = offsetof(struct mlx5_cqe64, timestamp),
	CQE_SOP_QPN    = offsetof(struct mlx5_cqe64, sop_drop_qpn),
	CQE_WQE_CNT    = offsetof(struct mlx5_cqe64, wqe_counter),
	CQE_SIG        = offsetof(struct mlx5_cqe64, signature),
	CQE_OP_OWN     = offsetof(struct mlx5_cqe64, op_own),
	ERR_SIZE       = sizeof(struct mlx5_err_cqe),
	ERR_VENDOR     = offsetof(struct mlx5_err_cqe, vendor_err_synd),
	ERR_SYND       = offsetof(struct mlx5_err_cqe, syndrome),
	ERR_QPN        = offsetof(struct mlx5_err_cqe, s_wqe_opcode_qpn),
	ERR_WQE_CNT    = offsetof(struct mlx5_err_cqe, wqe_counter),
	DSEG_SIZE      = sizeof(struct mlx5_wqe_data_seg),
	DSEG_COUNT     = offsetof(struct mlx5_wqe_data_seg, byte_count),
	DSEG_LKEY      = offsetof(struct mlx5_wqe_data_seg, lkey),
	DSEG_ADDR      = offsetof(struct mlx5_wqe_data_seg, addr),
	CTRL_SIZE      = sizeof(struct mlx5_wqe_ctrl_seg),
	CTRL_OPIDX     = offsetof(struct mlx5_wqe_ctrl_seg, opmod_idx_opcode),
	CTRL_QPNDS     = offsetof(struct mlx5_wqe_ctrl_seg, qpn_ds),
	CTRL_SIG       = offsetof(struct mlx5_wqe_ctrl_seg, signature),
	CTRL_STREAM    = offsetof(struct mlx5_wqe_ctrl_seg, dci_stream_channel_id),
	CTRL_FMCESE    = offsetof(struct mlx5_wqe_ctrl_seg, fm_ce_se),
	CTRL_IMM       = offsetof(struct mlx5_wqe_ctrl_seg, imm),
	ETH_SIZE       = sizeof(struct mlx5_wqe_eth_seg),
	ETH_CSFLAGS    = offsetof(struct mlx5_wqe_eth_seg, cs_flags),
	ETH_MSS        = offsetof(struct mlx5_wqe_eth_seg, mss),
	ETH_INLSZ      = offsetof(struct mlx5_wqe_eth_seg, inline_hdr_sz),
	ETH_INLSTART   = offsetof(struct mlx5_wqe_eth_seg, inline_hdr_start),
	ETH_INLINE     = SZ(struct mlx5_wqe_eth_seg, inline_hdr_start) + SZ(struct mlx5_wqe_eth_seg, inline_hdr),
	NSEG_SIZE      = sizeof(struct mlx5_wqe_srq_next_seg),
	NSEG_NEXT      = offsetof(struct mlx5_wqe_srq_next_seg, next_wqe_index),
	CQE_RSVD4      = offsetof(struct mlx5_cqe64, rsvd4),
	CQE_RSVD4_SZ   = SZ(struct mlx5_cqe64, rsvd4),
	CQE_ML_PATH    = offsetof(struct mlx5_cqe64, ml_path),
	CQE_RSVD20     = offsetof(struct mlx5_cqe64, rsvd20),
	CQE_RSVD20_SZ  = SZ(struct mlx5_cqe64, rsvd20),
	CQE_SLID       = offsetof(struct mlx5_cqe64, slid),
	CQE_FLAGS_RQPN = offsetof(struct mlx5_cqe64, flags_rqpn),
	CQE_APP        = offsetof(struct mlx5_cqe64, app),
	CQE_BYTE_CNT_SZ = SZ(struct mlx5_cqe64, byte_cnt),
	RCV_DBR_OFF    = MLX5_RCV_DBR * 4,
	SND_DBR_OFF    = MLX5_SND_DBR * 4,
};
*/
import "C"

import "github.com/scrubd/scrubd/swpath/dv/prm"

// cEntry is one value from rdma-core's mlx5dv.h and the prm constant
// that must equal it.
type cEntry struct {
	name   string
	c, prm int
}

// layoutTable pairs every prm constant with the value rdma-core's header
// gives for it. The test in clayout_test.go requires them equal.
func layoutTable() []cEntry {
	return []cEntry{
		{"sizeof(mlx5_cqe64)", C.CQE_SIZE, prm.CQESize},
		{"mlx5_cqe64.wqe_id", C.CQE_WQE_ID, prm.CQEOffWQEID},
		{"mlx5_cqe64.hds_ip_ext", C.CQE_HDS_IP, prm.CQEOffHdsIP},
		{"mlx5_cqe64.l4_hdr_type_etc", C.CQE_L4L3, prm.CQEOffL4L3},
		{"mlx5_cqe64.vlan_info", C.CQE_VLAN, prm.CQEOffVLAN},
		{"mlx5_cqe64.srqn_uidx", C.CQE_SRQN, prm.CQEOffSrqn},
		{"mlx5_cqe64.imm_inval_pkey", C.CQE_IMM, prm.CQEOffImm},
		{"mlx5_cqe64.byte_cnt", C.CQE_BYTE_CNT, prm.CQEOffByteCnt},
		{"mlx5_cqe64.timestamp", C.CQE_TSTAMP, prm.CQEOffTstamp},
		{"mlx5_cqe64.sop_drop_qpn", C.CQE_SOP_QPN, prm.CQEOffSopQPN},
		{"mlx5_cqe64.wqe_counter", C.CQE_WQE_CNT, prm.CQEOffWQECnt},
		{"mlx5_cqe64.signature", C.CQE_SIG, prm.CQEOffSig},
		{"mlx5_cqe64.op_own", C.CQE_OP_OWN, prm.CQEOffOpOwn},
		{"sizeof(mlx5_err_cqe)", C.ERR_SIZE, prm.CQESize},
		{"mlx5_err_cqe.vendor_err_synd", C.ERR_VENDOR, prm.CQEOffVendorSynd},
		{"mlx5_err_cqe.syndrome", C.ERR_SYND, prm.CQEOffSyndrome},
		{"mlx5_err_cqe.s_wqe_opcode_qpn", C.ERR_QPN, prm.CQEOffErrQPN},
		{"mlx5_err_cqe.wqe_counter", C.ERR_WQE_CNT, prm.CQEOffWQECnt},
		{"sizeof(mlx5_wqe_data_seg)", C.DSEG_SIZE, prm.DataSegSize},
		{"mlx5_wqe_data_seg.byte_count", C.DSEG_COUNT, prm.DataSegOffCount},
		{"mlx5_wqe_data_seg.lkey", C.DSEG_LKEY, prm.DataSegOffLKey},
		{"mlx5_wqe_data_seg.addr", C.DSEG_ADDR, prm.DataSegOffAddr},
		{"sizeof(mlx5_wqe_ctrl_seg)", C.CTRL_SIZE, prm.CtrlSegSize},
		{"mlx5_wqe_ctrl_seg.opmod_idx_opcode", C.CTRL_OPIDX, prm.CtrlOffOpIdx},
		{"mlx5_wqe_ctrl_seg.qpn_ds", C.CTRL_QPNDS, prm.CtrlOffQPNDS},
		{"mlx5_wqe_ctrl_seg.signature", C.CTRL_SIG, prm.CtrlOffSig},
		{"mlx5_wqe_ctrl_seg.dci_stream_channel_id", C.CTRL_STREAM, prm.CtrlOffStream},
		{"mlx5_wqe_ctrl_seg.fm_ce_se", C.CTRL_FMCESE, prm.CtrlOffFmCeSe},
		{"mlx5_wqe_ctrl_seg.imm", C.CTRL_IMM, prm.CtrlOffImm},
		{"sizeof(mlx5_wqe_eth_seg)", C.ETH_SIZE, prm.EthSegSize},
		{"mlx5_wqe_eth_seg.cs_flags", C.ETH_CSFLAGS, prm.EthOffCsFlags},
		{"mlx5_wqe_eth_seg.mss", C.ETH_MSS, prm.EthOffMSS},
		{"mlx5_wqe_eth_seg.inline_hdr_sz", C.ETH_INLSZ, prm.EthOffInlSz},
		{"mlx5_wqe_eth_seg.inline_hdr_start", C.ETH_INLSTART, prm.EthOffInlStart},
		{"sizeof(inline_hdr_start)+sizeof(inline_hdr)", C.ETH_INLINE, prm.EthInlineSize},
		{"sizeof(ctrl+eth+data)/16", (C.CTRL_SIZE + C.ETH_SIZE + C.DSEG_SIZE) / 16, prm.SendDS},
		{"MLX5_SEND_WQE_BB", C.MLX5_SEND_WQE_BB, prm.SendWQEBB},
		{"MLX5_SEND_WQE_SHIFT", C.MLX5_SEND_WQE_SHIFT, prm.SendWQEShift},
		{"MLX5_RCV_DBR*4", C.RCV_DBR_OFF, prm.RQDBROff},
		{"MLX5_SND_DBR*4", C.SND_DBR_OFF, prm.SQDBROff},
		{"MLX5_INVALID_LKEY", C.MLX5_INVALID_LKEY, prm.InvalidLKey},
		{"MLX5_OPCODE_SEND", C.MLX5_OPCODE_SEND, prm.OpcodeSend},
		{"MLX5_OPCODE_NOP", C.MLX5_OPCODE_NOP, prm.OpcodeNOP},
		{"MLX5_WQE_CTRL_CQ_UPDATE", C.MLX5_WQE_CTRL_CQ_UPDATE, prm.CtrlCQUpdate},
		{"MLX5_ETH_WQE_L3_CSUM", C.MLX5_ETH_WQE_L3_CSUM, prm.EthL3Csum},
		{"MLX5_ETH_WQE_L4_CSUM", C.MLX5_ETH_WQE_L4_CSUM, prm.EthL4Csum},
		{"MLX5_CQE_OWNER_MASK", C.MLX5_CQE_OWNER_MASK, prm.OwnerMask},
		{"MLX5_CQE_REQ", C.MLX5_CQE_REQ, prm.CQEReq},
		{"MLX5_CQE_RESP_WR_IMM", C.MLX5_CQE_RESP_WR_IMM, prm.CQERespWrImm},
		{"MLX5_CQE_RESP_SEND", C.MLX5_CQE_RESP_SEND, prm.CQERespSend},
		{"MLX5_CQE_RESP_SEND_IMM", C.MLX5_CQE_RESP_SEND_IMM, prm.CQERespSendImm},
		{"MLX5_CQE_RESP_SEND_INV", C.MLX5_CQE_RESP_SEND_INV, prm.CQERespSendInv},
		{"MLX5_CQE_RESIZE_CQ", C.MLX5_CQE_RESIZE_CQ, prm.CQEResizeCQ},
		{"MLX5_CQE_NO_PACKET", C.MLX5_CQE_NO_PACKET, prm.CQENoPacket},
		{"MLX5_CQE_SIG_ERR", C.MLX5_CQE_SIG_ERR, prm.CQESigErr},
		{"MLX5_CQE_REQ_ERR", C.MLX5_CQE_REQ_ERR, prm.CQEReqErr},
		{"MLX5_CQE_RESP_ERR", C.MLX5_CQE_RESP_ERR, prm.CQERespErr},
		{"MLX5_CQE_INVALID", C.MLX5_CQE_INVALID, prm.CQEInvalid},
		{"MLX5_CQE_L2_OK", C.MLX5_CQE_L2_OK, prm.CQEL2OK},
		{"MLX5_CQE_L3_OK", C.MLX5_CQE_L3_OK, prm.CQEL3OK},
		{"MLX5_CQE_L4_OK", C.MLX5_CQE_L4_OK, prm.CQEL4OK},
		{"MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR", C.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, prm.SyndLocalLength},
		{"MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR", C.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, prm.SyndLocalQPOp},
		{"MLX5_CQE_SYNDROME_LOCAL_PROT_ERR", C.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR, prm.SyndLocalProt},
		{"MLX5_CQE_SYNDROME_WR_FLUSH_ERR", C.MLX5_CQE_SYNDROME_WR_FLUSH_ERR, prm.SyndWRFlush},
		{"MLX5DV_CQE_RES_FORMAT_HASH", C.MLX5DV_CQE_RES_FORMAT_HASH, prm.ResFormatHash},
		{"MLX5DV_CQE_RES_FORMAT_CSUM", C.MLX5DV_CQE_RES_FORMAT_CSUM, prm.ResFormatCsum},
		{"MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX", C.MLX5DV_CQE_RES_FORMAT_CSUM_STRIDX, prm.ResFormatStridx},
		// The RX hash, hash type and checksum fields have no names in
		// rdma-core's struct mlx5_cqe64: they lie in its reserved bytes.
		// The kernel's include/linux/mlx5/device.h struct mlx5_cqe64 names
		// them (rss_hash_result at 0x0c, rss_hash_type 0x10, ml_path 0x11,
		// check_sum 0x14, slid 0x16); these rows pin the named offsets to
		// rdma-core's reserved arrays and to the neighbours both headers
		// name, so a wrong offset (or a header that moves them) fails.
		{"rx_hash_result = mlx5_cqe64.rsvd4 + 8", C.CQE_RSVD4 + 8, prm.CQEOffRxHash},
		{"rx_hash_type = last byte of mlx5_cqe64.rsvd4", C.CQE_RSVD4 + C.CQE_RSVD4_SZ - 1, prm.CQEOffHashTyp},
		{"rx_hash_type + 1 = mlx5_cqe64.ml_path", C.CQE_ML_PATH, prm.CQEOffHashTyp + 1},
		{"check_sum = mlx5_cqe64.rsvd20 + 2", C.CQE_RSVD20 + 2, prm.CQEOffCsum},
		{"check_sum + 2 = mlx5_cqe64.slid (end of rsvd20)", C.CQE_SLID, prm.CQEOffCsum + 2},
		{"mlx5_cqe64.rsvd20 + sizeof(rsvd20) = slid", C.CQE_RSVD20 + C.CQE_RSVD20_SZ, C.CQE_SLID},
		{"mlx5_cqe64.flags_rqpn + 4 = hds_ip_ext", C.CQE_FLAGS_RQPN + 4, prm.CQEOffHdsIP},
		{"sizeof(mlx5_cqe64.byte_cnt) (title: mini-CQE count)", C.CQE_BYTE_CNT_SZ, 4},
		// The mini-CQE is not in rdma-core's public header either: the
		// kernel's include/linux/mlx5/device.h has struct mlx5_mini_cqe8
		// (a union of rx_hash_result / checksum at 0, byte_cnt at 4) and
		// MLX5_MINI_CQE_ARRAY_SIZE 8, which fill one CQE slot.
		{"sizeof(mlx5_cqe64)/MLX5_MINI_CQE_ARRAY_SIZE (mini-CQE)", C.CQE_SIZE / 8, prm.MiniCQESize},
		{"mlx5_mini_cqe8.rx_hash_result", 0, prm.MiniOffRxHash},
		{"mlx5_mini_cqe8.checksum", 0, prm.MiniOffCsum},
		{"mlx5_mini_cqe8.byte_cnt", 4, prm.MiniOffByteCnt},
		{"MLX5_MINI_CQE_ARRAY_SIZE", 8, prm.MiniPerSlot},
	}
}
