// MINIMUM leaves the minimum of Y11's eight 32-bit lanes in r, with X12
// as scratch: shared by the AVX2 leaf scans (tree_vec_amd64.s) and the
// AVX-512 lane scans (tree_lanes_amd64.s).
#define MINIMUM(r) \
	VEXTRACTI128	$1, Y11, X12 \
	VPMINUD	X12, X11, X11 \
	VPSHUFD	$0x4e, X11, X12 \
	VPMINUD	X12, X11, X11 \
	VPSHUFD	$0xb1, X11, X12 \
	VPMINUD	X12, X11, X11 \
	VMOVD	X11, r
