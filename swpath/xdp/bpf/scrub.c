// SPDX-License-Identifier: GPL-2.0
/* scrubd XDP engine: a tuple-space classifier with the match semantics of
 * swpath/rule (see that package's doc). The Go side (swpath/xdp) compiles a
 * rule set into the four per-generation tables below and flips the active
 * generation with one 32-bit store (the global active); limits are checked
 * in Go before load.
 *
 * Tables of one generation:
 *   masks: ARRAY[1] of struct masktab: MAX_MASKS struct mask sorted by
 *          best_rank ascending; unused slots have best_rank = RANK_NONE,
 *          which ends the walk.
 *   keys:  HASH of masked tuple (mask id in the tuple) -> the first (best
 *          ranked) struct ent of the list of entries sharing that masked
 *          tuple; the rest follow through ent.next in ents, sorted by rank.
 *   ents:  ARRAY of struct ent: one expansion of one rule, with the residual
 *          conditions (ranges, flags, fragment, length, DSCP) checked here.
 *   ports: [65536] by destination port -> struct pent (one half of the
 *          global array ports, below, per generation), the first entry of
 *          the port mask's list for that port in short form (flags 0: none;
 *          16 bytes, so four heads share a cache line). The port mask (kind
 *          KIND_PORT) holds every entry whose mask is only an exact
 *          destination port (with or without family and protocol, which the
 *          entry checks): the usual DDoS rule costs one indexed load, not a
 *          hash of the tuple, and when it has no other condition (PE_FULL
 *          clear) not even the entry's lookup.
 * rank is the rule's position in the deciding order (priority, then index):
 * the lowest rank that matches decides.
 */
#include "types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MAX_MASKS 256 /* masks walked per packet (swpath/xdp.MaxMasks) */
#define MAX_CHAIN 1024 /* entries sharing one masked tuple (MaxChain) */
#define NR 4          /* ranges per field per entry (RangesPerEntry) */
#define MAX_EXT 4     /* rule.MaxIPv6ExtHeaders */
#define RANK_NONE 0xffffffffU

/* Fragment states, as rule.Frag. */
#define F_DF 1
#define F_IS 2
#define F_FIRST 4
#define F_LAST 8
#define F_NOT 16

/* ent.need bits. */
#define NEED_PORTS 1
#define NEED_TCP 2
#define NEED_ICMP 4
#define NEED_PFX 8 /* prefixes longer than the mask's: check them here */
#define NEED_PROTO 16 /* port mask: ent.proto must equal the packet's */
#define NEED_V4 32 /* port mask: IPv4 only */
#define NEED_V6 64 /* port mask: IPv6 only */
#define NEED_ANY 128 /* some residual condition at all (else: a match) */

/* mask kinds. */
#define KIND_HASH 0
#define KIND_PORT 1

/* Verdict counter slots (swpath/xdp.Verdict). */
#define V_NOTIP 0
#define V_PASS 1
#define V_DROP 2   /* not counted here by the program: see struct rctr */
#define V_ACCEPT 3
#define V_REDIRFAIL 4 /* inline: passed, but no peer in tx_port to redirect to */
#define V_MAX 5

/* active (a global, below): bit 0 the generation in force; bit 1 set when
 * its first mask is the port mask (the fast path may decide). Both in the
 * low byte, so the flip changes both at once even where the value is copied
 * byte by byte. Which port heads decide on the fast path is in the heads
 * themselves (PE_FAST_TCP, PE_FAST_UDP, PE_PASS), written with the
 * generation. */
#define ACTIVE_FAST 2
#define MODE_INLINE 1

/* The masked part of a packet: every byte in network order, so the layout
 * is the same on both endiannesses. */
struct tuple {
	__u8 fam;
	__u8 proto;
	__u8 sport[2];
	__u8 dport[2];
	__u8 mid; /* mask id, set after masking */
	__u8 pad;
	__u8 src[16];
	__u8 dst[16];
} __attribute__((aligned(8)));

/* MID_WORD(i) is mask id i at tuple.mid (byte 6) of the tuple's first word
 * as loaded on this byte order. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define MID_WORD(i) ((__u64)(__u8)(i) << 48)
#else
#define MID_WORD(i) ((__u64)(__u8)(i) << 8)
#endif

struct mask {
	struct tuple m;
	__u32 best_rank;
	__u32 kind;
};

/* The entries sharing one masked tuple form a list through ent.next,
 * sorted by rank. */
/* All masks of a generation in one array element: one lookup per packet. */
struct masktab {
	struct mask m[MAX_MASKS];
};

struct range16 {
	__u16 lo, hi;
};

struct range32 {
	__u32 lo, hi;
};

struct ent {
	__u32 rule; /* counter slot */
	__u32 rank;
	__u8 action; /* 0 drop, 1 accept (rule.Action) */
	__u8 need;
	__u8 n_sport, n_dport, n_port, n_itype, n_icode, n_len;
	__u8 tcp_val, tcp_mask, frag, proto;
	__u32 next; /* next entry with the same masked tuple, or RANK_NONE */
	__u64 dscp;
	struct range16 sport[NR], dport[NR], port[NR], itype[NR], icode[NR];
	struct range32 len[NR];
	/* Exact prefixes when the mask holds shorter ones (tuple merging). */
	__u8 src_m[16], src_v[16], dst_m[16], dst_v[16];
};

/* pent is a port mask list head: enough of the entry to decide when its
 * only conditions are protocol, family and "has ports". */
struct pent {
	__u32 rule, rank;
	__u32 ent; /* index in ents of the entry itself (its next is there) */
	__u8 action, need, proto, flags;
};
#define PE_VALID 1
#define PE_FULL 2 /* other conditions: check ents[ent] */
/* PE_FAST_TCP, PE_FAST_UDP: the fast path may decide with this head for a
 * TCP (UDP) packet: no condition beyond protocol, family and ports, the
 * protocol (if any) is that one, not IPv6 only, and no other mask can beat
 * its rank. PE_PASS (without PE_VALID): no list for this port and the port
 * mask is the only mask, so the fast path passes. */
#define PE_FAST_TCP 4
#define PE_PASS 8
#define PE_FAST_UDP 16

struct ctr {
	__u64 packets;
	__u64 bytes;
};

/* rctr is a rule's counter, split by the action it decided with: the
 * Dropped and Accepted verdicts are these summed over rules (plus what the
 * Go side retired into verdicts when it reused a slot), so a packet a rule
 * decides costs one counter update, not two. */
struct rctr {
	struct ctr by[2]; /* by ent.action: 0 drop, 1 accept */
};

struct pkt {
	struct tuple t;
	__u32 len;
	__u16 sport, dport; /* host order */
	__u8 l4, has_ports, has_icmp, tcp_flags, itype, icode, frag, dscp;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_ARRAY);
		__uint(max_entries, 1);
		__uint(key_size, sizeof(__u32));
		__uint(value_size, sizeof(struct masktab));
	});
} masks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_HASH);
		__uint(max_entries, 1);
		__uint(key_size, sizeof(struct tuple));
		__uint(value_size, sizeof(struct ent));
	});
} keys SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_ARRAY);
		__uint(max_entries, 1);
		__uint(map_flags, BPF_F_INNER_MAP);
		__uint(key_size, sizeof(__u32));
		__uint(value_size, sizeof(struct ent));
	});
} ents SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 16384); /* resized from Go */
	__type(key, __u32);
	__type(value, struct rctr);
} rule_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, V_MAX);
	__type(key, __u32);
	__type(value, struct ctr);
} verdicts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} tx_port SEC(".maps");

/* trace is set only in a program loaded for dry runs (BPF_PROG_TEST_RUN):
 * the return value then also carries the verdict and the deciding rule's
 * counter slot + 1. It is a load-time constant, so in the normal program the
 * verifier removes the branch. */
volatile const __u32 trace = 0;

/* mode is Host (0) or MODE_INLINE, fixed when the program is loaded: in host
 * mode the verifier removes the redirect. */
volatile const __u32 mode = 0;

/* active is the generation word (ACTIVE_FAST above), a global so the program
 * reads it with one load from a known address, no map lookup. The Go side
 * flips it with a store through the memory-mapped .bss, which it pins with
 * the tables: a restarted agent's program goes on with the same word. */
__u32 active = 0;

/* ports holds both generations' port heads, index gen << 16 | port: a
 * global, so the fast path indexes it directly (no helper call, no key on
 * the stack). The Go side rewrites the inactive half in place through the
 * memory-mapped .bss, only after an RCU grace period has passed since the
 * flip that made it inactive (see Engine.Replace). */
struct pent ports[2 * 65536];

/* bloom is a Bloom filter (one hash function) over every key of the keys
 * hash, half per generation: 2^BLOOM_LOG2 bits, index bloom_idx of the masked
 * tuple with its mask id. A mask whose bit is clear cannot hold the packet,
 * so its hash lookup is skipped: a few multiplies instead of a jhash of 40
 * bytes and a bucket walk for most masks of a walk. Written like ports. */
#define BLOOM_LOG2 20
#define BLOOM_WORDS (1 << (BLOOM_LOG2 - 6))
__u64 bloom[2 * BLOOM_WORDS];

/* bloom_idx is a multiply-shift hash of the five words of a tuple as they
 * lie in memory (swpath/xdp.bloomIndex computes the same). */
static __always_inline __u32 bloom_idx(const __u64 *w)
{
	__u64 h = w[0] * 0x9e3779b97f4a7c15ULL + w[1] * 0xc2b2ae3d27d4eb4fULL + w[2] * 0x165667b19e3779f9ULL +
		  w[3] * 0xd6e8feb86659fd93ULL + w[4] * 0xff51afd7ed558ccdULL;
	return h >> (64 - BLOOM_LOG2);
}

/* Header fields are read with plain loads of their width, aligned or not:
 * the verifier allows unaligned packet access where the CPU has it (x86-64,
 * arm64), and clang would otherwise split them into byte loads. */
static __always_inline __u16 be16(const __u8 *p)
{
	return bpf_ntohs(*(const __u16 *)p);
}

static __always_inline __u8 frag_state(int df, int mf, __u16 off)
{
	__u8 f = df ? F_DF : 0;
	if (off != 0)
		f |= mf ? F_IS : (F_IS | F_LAST);
	else
		f |= mf ? F_FIRST : F_NOT;
	return f;
}

/* parse_l4 fills the L4 fields when the fixed header is captured. */
static __always_inline void parse_l4(struct pkt *p, __u8 *l4, void *end)
{
	__u8 proto = p->t.proto;
	if (proto == 6 || proto == 17 || proto == 132) {
		if (proto == 6) {
			if ((void *)(l4 + 20) > end)
				return;
			p->tcp_flags = l4[13];
		} else if (proto == 17) {
			if ((void *)(l4 + 8) > end)
				return;
		} else if ((void *)(l4 + 12) > end) {
			return;
		}
		p->l4 = 1;
		p->has_ports = 1;
		*(__u16 *)p->t.sport = *(const __u16 *)l4;
		*(__u16 *)p->t.dport = *(const __u16 *)(l4 + 2);
		p->sport = be16(l4);
		p->dport = be16(l4 + 2);
		return;
	}
	if ((p->t.fam == 4 && proto == 1) || (p->t.fam == 6 && proto == 58)) {
		if ((void *)(l4 + 4) > end)
			return;
		p->l4 = 1;
		p->has_icmp = 1;
		p->itype = l4[0];
		p->icode = l4[1];
		return;
	}
	/* Other protocols: no rule condition reads their header. */
}

static __always_inline int is_ext(__u8 nh)
{
	return nh == 0 || nh == 43 || nh == 60 || nh == 44;
}

/* parse returns 1 for an IP packet (fields filled), 0 for anything else. */
static __always_inline int parse(struct pkt *p, __u8 *d, void *end)
{
	if ((void *)(d + 14) > end)
		return 0;
	__u16 et = be16(d + 12);
	__u8 *l3 = d + 14;
	if (et == 0x8100 || et == 0x88a8) {
		if ((void *)(l3 + 4) > end)
			return 0;
		et = be16(l3 + 2);
		l3 += 4;
		if (et == 0x8100 || et == 0x88a8) {
			if ((void *)(l3 + 4) > end)
				return 0;
			et = be16(l3 + 2);
			l3 += 4;
			if (et == 0x8100 || et == 0x88a8)
				return 0;
		}
	}
	if (et == 0x0800) {
		if ((void *)(l3 + 20) > end)
			return 0;
		if ((l3[0] >> 4) != 4)
			return 0;
		__u32 ihl = (l3[0] & 15) * 4;
		if (ihl < 20)
			return 0;
		if ((void *)(l3 + ihl) > end)
			return 0;
		p->t.fam = 4;
		p->dscp = l3[1] >> 2;
		p->len = be16(l3 + 2);
		__u16 fo = be16(l3 + 6);
		__u16 off = fo & 0x1fff;
		p->frag = frag_state(fo & 0x4000, fo & 0x2000, off);
		p->t.proto = l3[9];
		*(__u32 *)p->t.src = *(const __u32 *)(l3 + 12);
		*(__u32 *)p->t.dst = *(const __u32 *)(l3 + 16);
		if (off == 0)
			parse_l4(p, l3 + ihl, end);
		return 1;
	}
	if (et != 0x86dd)
		return 0;
	if ((void *)(l3 + 40) > end)
		return 0;
	if ((l3[0] >> 4) != 6)
		return 0;
	p->t.fam = 6;
	p->dscp = (((l3[0] & 15) << 4) | (l3[1] >> 4)) >> 2;
	p->len = 40 + (__u32)be16(l3 + 4);
	p->frag = F_NOT;
	__u64 *ts = (__u64 *)p->t.src, *td = (__u64 *)p->t.dst;
	ts[0] = *(const __u64 *)(l3 + 8);
	ts[1] = *(const __u64 *)(l3 + 16);
	td[0] = *(const __u64 *)(l3 + 24);
	td[1] = *(const __u64 *)(l3 + 32);
	__u8 nh = l3[6];
	__u8 *cur = l3 + 40;
	int stop = 0;
#pragma unroll
	for (int i = 0; i < MAX_EXT; i++) {
		if (stop || !is_ext(nh))
			break;
		if (nh == 44) {
			if ((void *)(cur + 8) > end) {
				stop = 1;
				break;
			}
			__u16 fo = be16(cur + 2);
			p->frag = frag_state(0, fo & 1, fo >> 3);
			nh = cur[0];
			cur += 8;
			if (fo >> 3) {
				stop = 1; /* non-first fragment: no more headers */
				break;
			}
			continue;
		}
		if ((void *)(cur + 2) > end) {
			stop = 1;
			break;
		}
		__u32 hl = ((__u32)cur[1] + 1) * 8;
		__u8 next = cur[0];
		if ((void *)(cur + hl) > end) {
			stop = 1;
			break;
		}
		nh = next;
		cur += hl;
	}
	p->t.proto = nh;
	if (!stop && !is_ext(nh))
		parse_l4(p, cur, end);
	return 1;
}

static __always_inline int in16(const struct range16 *r, __u8 n, __u16 v)
{
#pragma unroll
	for (int i = 0; i < NR; i++)
		if (i < n && v >= r[i].lo && v <= r[i].hi)
			return 1;
	return 0;
}

static __always_inline int in32(const struct range32 *r, __u8 n, __u32 v)
{
#pragma unroll
	for (int i = 0; i < NR; i++)
		if (i < n && v >= r[i].lo && v <= r[i].hi)
			return 1;
	return 0;
}

/* residual reports whether the packet meets the conditions of e that the
 * masked tuple does not already decide. */
/* Not inlined: one copy instead of one per call site keeps the program (and
 * the fast path's instruction cache footprint) small. */
static __attribute__((noinline)) int residual(const struct ent *e, const struct pkt *p)
{
	if (!(e->need & NEED_ANY))
		return 1;
	if ((e->need & NEED_PROTO) && p->t.proto != e->proto)
		return 0;
	if ((e->need & NEED_V4) && p->t.fam != 4)
		return 0;
	if ((e->need & NEED_V6) && p->t.fam != 6)
		return 0;
	if (e->need & NEED_PFX) {
		const __u64 *a = (const __u64 *)p->t.src, *b = (const __u64 *)p->t.dst;
		const __u64 *sm = (const __u64 *)e->src_m, *sv = (const __u64 *)e->src_v;
		const __u64 *dm = (const __u64 *)e->dst_m, *dv = (const __u64 *)e->dst_v;
		if ((a[0] & sm[0]) != sv[0] || (a[1] & sm[1]) != sv[1] ||
		    (b[0] & dm[0]) != dv[0] || (b[1] & dm[1]) != dv[1])
			return 0;
	}
	if ((e->need & NEED_PORTS) && !p->has_ports)
		return 0;
	if (e->n_sport && !in16(e->sport, e->n_sport, p->sport))
		return 0;
	if (e->n_dport && !in16(e->dport, e->n_dport, p->dport))
		return 0;
	if (e->n_port && !in16(e->port, e->n_port, p->sport) && !in16(e->port, e->n_port, p->dport))
		return 0;
	if (e->need & NEED_TCP) {
		if (!p->l4 || p->t.proto != 6 || (p->tcp_flags & e->tcp_mask) != e->tcp_val)
			return 0;
	}
	if (e->need & NEED_ICMP) {
		if (!p->has_icmp)
			return 0;
		if (e->n_itype && !in16(e->itype, e->n_itype, p->itype))
			return 0;
		if (e->n_icode && !in16(e->icode, e->n_icode, p->icode))
			return 0;
	}
	if (e->frag && !(e->frag & p->frag))
		return 0;
	if (e->n_len && !in32(e->len, e->n_len, p->len))
		return 0;
	if (e->dscp && !((e->dscp >> (p->dscp & 63)) & 1))
		return 0;
	return 1;
}

/* walk is the state of the walk over the masks (bpf_loop keeps the
 * verifier's work to one pass over the loop body). */
struct walk {
	struct pkt *p;
	struct masktab *mt;
	__u32 gen; /* the generation: inner maps are looked up where needed */
	__u32 best, rule, ent;
	__u8 action;
};

/* take tries candidate e: 1 when the walk of its list is over (e decided,
 * or it and every later entry rank too low). */
static __always_inline int take(struct walk *w, const struct ent *e)
{
	if (e->rank >= w->best)
		return 1; /* sorted by rank: nothing further can win */
	if (residual(e, w->p)) {
		w->best = e->rank;
		w->rule = e->rule;
		w->action = e->action;
		return 1;
	}
	return 0;
}

static long walk_chain(__u32 j, void *ctx)
{
	struct walk *w = ctx;
	__u32 ei = w->ent;
	void *em = bpf_map_lookup_elem(&ents, &w->gen);
	if (!em)
		return 1;
	struct ent *e = bpf_map_lookup_elem(em, &ei);
	if (!e || take(w, e))
		return 1;
	w->ent = e->next;
	return 0;
}

/* chain walks a list from its first entry: the first inline, the rest (rare:
 * entries sharing a masked tuple) with bpf_loop. */
static __always_inline void chain(struct walk *w, const struct ent *e)
{
	if (take(w, e) || e->next == RANK_NONE)
		return;
	w->ent = e->next;
	bpf_loop(MAX_CHAIN - 1, walk_chain, w, 0);
}

/* mask_step looks the packet up under mask i; 1 ends the walk. */
static __always_inline int mask_step(struct walk *w, __u32 i)
{
	struct pkt *p = w->p;
	if (i >= MAX_MASKS)
		return 1;
	struct mask *m = &w->mt->m[i];
	if (m->best_rank >= w->best)
		return 1; /* masks are sorted: none left can win */
	if (m->kind == KIND_PORT) {
		struct pent *h = &ports[(w->gen << 16 | p->dport) & 0x1ffff];
		if (!(h->flags & PE_VALID) || h->rank >= w->best)
			return 0;
		if (h->flags & PE_FULL) {
			void *em = bpf_map_lookup_elem(&ents, &w->gen);
			if (!em)
				return 0;
			__u32 ei = h->ent;
			struct ent *e = bpf_map_lookup_elem(em, &ei);
			if (e)
				chain(w, e);
			return 0;
		}
		__u8 need = h->need;
		if ((!(need & NEED_PORTS) || p->has_ports) &&
		    (!(need & NEED_PROTO) || p->t.proto == h->proto) &&
		    (!(need & NEED_V4) || p->t.fam == 4) &&
		    (!(need & NEED_V6) || p->t.fam == 6)) {
			w->best = h->rank;
			w->rule = h->rule;
			w->action = h->action;
			return 0;
		}
		/* The head does not match: go on down its list, whose next
		 * entry is in the head's own entry. */
		void *em = bpf_map_lookup_elem(&ents, &w->gen);
		if (!em)
			return 0;
		__u32 ei = h->ent;
		struct ent *e = bpf_map_lookup_elem(em, &ei);
		if (e && e->next != RANK_NONE) {
			w->ent = e->next;
			bpf_loop(MAX_CHAIN - 1, walk_chain, w, 0);
		}
		return 0;
	}
	struct tuple t;
	__u64 *tw = (__u64 *)&t, *mw = (__u64 *)&m->m, *pk = (__u64 *)&p->t;
	/* The mask id goes into word 0 in a register: a byte store into t
	 * followed by the word load of bloom_idx would stall on store
	 * forwarding. The mask's own mid byte is 0. */
	tw[0] = (pk[0] & mw[0]) | MID_WORD(i);
	tw[1] = pk[1] & mw[1];
	tw[2] = pk[2] & mw[2];
	tw[3] = pk[3] & mw[3];
	tw[4] = pk[4] & mw[4];
	__u32 b = bloom_idx(tw);
	if (!((bloom[(w->gen << (BLOOM_LOG2 - 6) | b >> 6) & (2 * BLOOM_WORDS - 1)] >> (b & 63)) & 1))
		return 0; /* no key of this mask can equal the packet's */
	void *km = bpf_map_lookup_elem(&keys, &w->gen);
	if (!km)
		return 0;
	struct ent *e = bpf_map_lookup_elem(km, &t);
	if (e)
		chain(w, e);
	return 0;
}

/* walk_mask is the bpf_loop body over the masks, in rank order. */
static long walk_mask(__u32 i, void *ctx)
{
	return mask_step(ctx, i);
}

static __always_inline void count(void *map, __u32 idx, __u64 bytes)
{
	struct ctr *c = bpf_map_lookup_elem(map, &idx);
	if (c) {
		c->packets++;
		c->bytes += bytes;
	}
}

/* fast decides the common packet without the general parse and walk: IPv4
 * without options, not a non-first fragment, UDP or TCP, in a generation
 * whose first mask is the port mask (ACTIVE_FAST), when the port's first
 * entry has no condition beyond protocol, family and ports and ranks before
 * every other mask (PE_FAST_TCP, PE_FAST_UDP). It returns that head, or
 * NULL for "take the general path" with *pass set when no rule can match
 * (PE_PASS). Anything it leaves to the general path is decided there the
 * same way. */
static __always_inline struct pent *fast(__u8 *d, void *end, __u32 gen, int *pass)
{
	if ((void *)(d + 14 + 20 + 8) > end)
		return 0;
	if (*(__u16 *)(d + 12) != bpf_htons(0x0800))
		return 0;
	__u8 *ip = d + 14;
	if (ip[0] != 0x45 || (*(__u16 *)(ip + 6) & bpf_htons(0x1fff)))
		return 0;
	__u8 proto = ip[9], want = PE_FAST_UDP;
	if (proto == 6) {
		if ((void *)(ip + 20 + 20) > end)
			return 0;
		want = PE_FAST_TCP;
	} else if (proto != 17) {
		return 0;
	}
	struct pent *h = &ports[(gen << 16 | bpf_ntohs(*(__u16 *)(ip + 22))) & 0x1ffff];
	__u8 f = h->flags;
	if (!(f & want)) {
		/* Other conditions, or another protocol's rule (the general
		 * path goes on down the list), or no rule at all. */
		*pass = f & PE_PASS;
		return 0;
	}
	return h;
}

/* forward is what happens to a packet that passes: to the stack in host
 * mode; inline, redirected to the peer port. */
static __always_inline int forward(__u64 bytes)
{
	if (mode != MODE_INLINE)
		return XDP_PASS;
	long r = bpf_redirect_map(&tx_port, 0, 0);
	if (r == XDP_REDIRECT)
		return r;
	/* No peer in the devmap (its interface is gone): pass to the stack,
	 * and count it. */
	count(&verdicts, V_REDIRFAIL, bytes);
	return XDP_PASS;
}

/* decided counts a packet a rule decided, once, in the rule's counter, and
 * returns what becomes of it. */
static __always_inline int decided(__u32 rule, __u8 action, __u64 bytes)
{
	struct rctr *rc = bpf_map_lookup_elem(&rule_stats, &rule);
	if (rc) {
		struct ctr *c = &rc->by[action & 1];
		c->packets++;
		c->bytes += bytes;
	}
	if (trace)
		return (action ? XDP_PASS : XDP_DROP) | ((action ? V_ACCEPT : V_DROP) << 4) | ((rule + 1) << 8);
	if (action == 0)
		return XDP_DROP;
	return forward(bytes);
}

/* undecided counts a packet no rule decided in its verdict and passes it. */
static __always_inline int undecided(__u32 verdict, __u64 bytes)
{
	count(&verdicts, verdict, bytes);
	if (trace)
		return XDP_PASS | (verdict << 4);
	return forward(bytes);
}

/* general is the general path: the full parse and the walk over the masks.
 * Not inlined, so that the entry function, which every packet runs, keeps
 * a small stack frame and saves few registers. */
static __attribute__((noinline)) int general(struct xdp_md *ctx, __u32 gen)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u64 bytes = end - data;
	struct pkt p = {};
	if (!parse(&p, data, end))
		return undecided(V_NOTIP, bytes);
	void *mm = bpf_map_lookup_elem(&masks, &gen);
	if (!mm)
		return undecided(V_PASS, bytes);
	__u32 zero = 0;
	struct masktab *mt = bpf_map_lookup_elem(mm, &zero);
	if (!mt)
		return undecided(V_PASS, bytes);

	struct walk w = {.p = &p, .mt = mt, .gen = gen, .best = RANK_NONE};
	/* Every mask through the loop, the first too: one copy of the mask
	 * step for the verifier (an inlined first step doubled its work and
	 * the load time, for about one call less per packet). */
	bpf_loop(MAX_MASKS, walk_mask, &w, 0);
	if (w.best == RANK_NONE)
		return undecided(V_PASS, bytes);
	return decided(w.rule, w.action, bytes);
}

SEC("xdp")
int scrub(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 word = active;
	__u32 gen = word & 1;
	if (word & ACTIVE_FAST) {
		int pass = 0;
		struct pent *h = fast(data, end, gen, &pass);
		if (h)
			return decided(h->rule, h->action, end - data);
		if (pass)
			return undecided(V_PASS, end - data);
	}
	return general(ctx, gen);
}

char __license[] SEC("license") = "GPL";
