/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * SHA-256 block function with the ARMv8 SHA-2 instructions (FEAT_SHA256):
 *   void sha256_blocks_ce(uint32_t state[8], const uint8_t *data, size_t nblocks)
 * The state lives in v0 (a,b,c,d) and v1 (e,f,g,h), the order sha256h and
 * sha256h2 work on; the 64 round constants in v16-v31; the message schedule in
 * the ring v4-v7, extended four words at a time by sha256su0/sha256su1 while
 * the rounds of earlier words run. v2 and v3 are scratch; v8-v15 (whose low
 * halves the AAPCS64 asks a callee to keep) are not touched, nor is the stack.
 * The same object runs in user space (the loader, tests) and in purgatory,
 * where it is the only code that uses the SIMD registers: purgatory enables
 * FP/SIMD access before it calls here. Loads are of bytes (ld1 .16b) and of
 * the 4-byte aligned state, so it also runs with the MMU off (Device memory).
 */

	.arch	armv8-a+crypto
	.text
	.p2align 3
	.globl	sha256_blocks_ce
	.hidden	sha256_blocks_ce
	.type	sha256_blocks_ce, %function

/* Four rounds on message words \w0 (W[4i..4i+3]); for i < 12 \w0 also becomes
 * W[4i+16..4i+19] from \w1, \w2, \w3, the three quads after it. */
.macro	quad	i, w0, w1, w2, w3, k
	add	v2.4s, \w0\().4s, \k\().4s
	.if	\i < 12
	sha256su0	\w0\().4s, \w1\().4s
	.endif
	mov	v3.16b, v0.16b
	sha256h	q0, q1, v2.4s
	sha256h2	q1, q3, v2.4s
	.if	\i < 12
	sha256su1	\w0\().4s, \w2\().4s, \w3\().4s
	.endif
.endm

sha256_blocks_ce:
	cbz	x2, 2f
	adrp	x3, sha256_k
	add	x3, x3, :lo12:sha256_k
	ld1	{v16.4s-v19.4s}, [x3], #64
	ld1	{v20.4s-v23.4s}, [x3], #64
	ld1	{v24.4s-v27.4s}, [x3], #64
	ld1	{v28.4s-v31.4s}, [x3]
	ld1	{v0.4s, v1.4s}, [x0]
1:	ld1	{v4.16b-v7.16b}, [x1], #64
	rev32	v4.16b, v4.16b
	rev32	v5.16b, v5.16b
	rev32	v6.16b, v6.16b
	rev32	v7.16b, v7.16b
	quad	0, v4, v5, v6, v7, v16
	quad	1, v5, v6, v7, v4, v17
	quad	2, v6, v7, v4, v5, v18
	quad	3, v7, v4, v5, v6, v19
	quad	4, v4, v5, v6, v7, v20
	quad	5, v5, v6, v7, v4, v21
	quad	6, v6, v7, v4, v5, v22
	quad	7, v7, v4, v5, v6, v23
	quad	8, v4, v5, v6, v7, v24
	quad	9, v5, v6, v7, v4, v25
	quad	10, v6, v7, v4, v5, v26
	quad	11, v7, v4, v5, v6, v27
	quad	12, v4, v5, v6, v7, v28
	quad	13, v5, v6, v7, v4, v29
	quad	14, v6, v7, v4, v5, v30
	quad	15, v7, v4, v5, v6, v31
	/* The block's input state is still in memory: add it and store. */
	ld1	{v2.4s, v3.4s}, [x0]
	add	v0.4s, v0.4s, v2.4s
	add	v1.4s, v1.4s, v3.4s
	st1	{v0.4s, v1.4s}, [x0]
	subs	x2, x2, #1
	b.ne	1b
2:	ret
	.size	sha256_blocks_ce, . - sha256_blocks_ce

	.section .note.GNU-stack, "", %progbits
