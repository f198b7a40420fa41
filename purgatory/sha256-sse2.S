/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * SHA-256 block function for x86_64 with the message schedule in the xmm
 * registers: sha256_blocks_sse2(state, data, nblocks).
 *
 * Why it exists: under QEMU's TCG (the lab, and any emulated host) every guest
 * memory access goes through the software TLB check, about 13 host
 * instructions, while a move between a general and an xmm register is a plain
 * load or store of QEMU's CPU state. The portable C function keeps its 16-word
 * schedule ring on the stack and reads K[t] from memory: about 380 memory
 * accesses a block. Here the ring lives in xmm0-xmm15 (word W[t] in the low
 * 32 bits of xmm(t mod 16)), K[t] is an immediate, and a block touches memory
 * only to read its 64 bytes and to add into the state: 32 accesses.
 *
 * The rounds are FIPS 180-4 section 6.2.2, unrolled: the working variables
 * are renamed instead of shifted, Sigma1(e) is computed as
 * ROTR6(e ^ ROTR5(e ^ ROTR14(e))), Sigma0(a) as ROTR2(a ^ ROTR11(a ^ ROTR9(a))),
 * and Maj(a,b,c) as b ^ ((a ^ b) & (b ^ c)), where this round's b ^ c is the
 * previous round's a ^ b (registers BC and AB swap roles every round).
 * sigma0(x) = ROTR7(x ^ ROTR11(x)) ^ (x >> 3), sigma1(x) =
 * ROTR17(x ^ ROTR2(x)) ^ (x >> 10).
 *
 * Only SSE2 is used (every x86_64 CPU has it); purgatory's entry enables SSE.
 * System V ABI: rdi = state[8], rsi = data, rdx = nblocks; rbx, rbp and
 * r12-r15 are saved, the xmm registers are caller-saved.
 */

#define A %eax
#define B %ebx
#define C %ecx
#define D %edx
#define E %r8d
#define F %r9d
#define G %r10d
#define H %r11d
#define BC %r12d
#define AB %r13d
#define T %r14d  /* Sigma, Ch and Maj temporary; W[t] for t < 16 */
#define W0 %r14d /* W[t] of a round that loaded it from the message */
#define W1 %ebp  /* W[t] of a round that scheduled it */
#define S %r15d  /* schedule temporary */

/* W[t] = the message's big-endian word t, kept in x. */
#define LOAD(t, x)              \
	movl 4 * (t)(%rsi), W0; \
	bswapl W0;              \
	movd W0, x

/* W[t] = sigma1(W[t-2]) + W[t-7] + sigma0(W[t-15]) + W[t-16]; cur holds
 * W[t-16] and receives W[t]. */
#define SCHEDULE(cur, m15, m7, m2) \
	movd m15, S;               \
	movl S, W1;                \
	rorl $11, W1;              \
	xorl S, W1;                \
	rorl $7, W1;               \
	shrl $3, S;                \
	xorl S, W1;                \
	movd m2, S;                \
	movl S, T;                 \
	rorl $2, T;                \
	xorl S, T;                 \
	rorl $17, T;               \
	shrl $10, S;               \
	xorl S, T;                 \
	addl T, W1;                \
	movd cur, S;               \
	addl S, W1;                \
	movd m7, S;                \
	addl S, W1;                \
	movd W1, cur

/* One round: h becomes the new a, d the new e. */
#define ROUND(a, b, c, d, e, f, g, h, bc, ab, w, k) \
	addl $(k), w;                               \
	addl w, h;                                  \
	movl e, T;                                  \
	rorl $14, T;                                \
	xorl e, T;                                  \
	rorl $5, T;                                 \
	xorl e, T;                                  \
	rorl $6, T;                                 \
	addl T, h;                                  \
	movl f, T;                                  \
	xorl g, T;                                  \
	andl e, T;                                  \
	xorl g, T;                                  \
	addl T, h;                                  \
	addl h, d;                                  \
	movl a, T;                                  \
	rorl $9, T;                                 \
	xorl a, T;                                  \
	rorl $11, T;                                \
	xorl a, T;                                  \
	rorl $2, T;                                 \
	addl T, h;                                  \
	movl a, ab;                                 \
	xorl b, ab;                                 \
	andl ab, bc;                                \
	xorl b, bc;                                 \
	addl bc, h

	.text
	.globl sha256_blocks_sse2
	.hidden sha256_blocks_sse2
	.type sha256_blocks_sse2, @function
sha256_blocks_sse2:
	testq	%rdx, %rdx
	jz	.Lnone
	pushq	%rbx
	pushq	%rbp
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	pushq	%rdx			/* (%rsp): blocks left */
.Lblock:
	movl	0(%rdi), A
	movl	4(%rdi), B
	movl	8(%rdi), C
	movl	12(%rdi), D
	movl	16(%rdi), E
	movl	20(%rdi), F
	movl	24(%rdi), G
	movl	28(%rdi), H
	movl	B, BC
	xorl	C, BC

	/* Round t uses the working variables rotated by t and W[t] in xmm(t mod 16). */
	LOAD(0, %xmm0)
	ROUND(A, B, C, D, E, F, G, H, BC, AB, W0, 0x428a2f98)
	LOAD(1, %xmm1)
	ROUND(H, A, B, C, D, E, F, G, AB, BC, W0, 0x71374491)
	LOAD(2, %xmm2)
	ROUND(G, H, A, B, C, D, E, F, BC, AB, W0, 0xb5c0fbcf)
	LOAD(3, %xmm3)
	ROUND(F, G, H, A, B, C, D, E, AB, BC, W0, 0xe9b5dba5)
	LOAD(4, %xmm4)
	ROUND(E, F, G, H, A, B, C, D, BC, AB, W0, 0x3956c25b)
	LOAD(5, %xmm5)
	ROUND(D, E, F, G, H, A, B, C, AB, BC, W0, 0x59f111f1)
	LOAD(6, %xmm6)
	ROUND(C, D, E, F, G, H, A, B, BC, AB, W0, 0x923f82a4)
	LOAD(7, %xmm7)
	ROUND(B, C, D, E, F, G, H, A, AB, BC, W0, 0xab1c5ed5)
	LOAD(8, %xmm8)
	ROUND(A, B, C, D, E, F, G, H, BC, AB, W0, 0xd807aa98)
	LOAD(9, %xmm9)
	ROUND(H, A, B, C, D, E, F, G, AB, BC, W0, 0x12835b01)
	LOAD(10, %xmm10)
	ROUND(G, H, A, B, C, D, E, F, BC, AB, W0, 0x243185be)
	LOAD(11, %xmm11)
	ROUND(F, G, H, A, B, C, D, E, AB, BC, W0, 0x550c7dc3)
	LOAD(12, %xmm12)
	ROUND(E, F, G, H, A, B, C, D, BC, AB, W0, 0x72be5d74)
	LOAD(13, %xmm13)
	ROUND(D, E, F, G, H, A, B, C, AB, BC, W0, 0x80deb1fe)
	LOAD(14, %xmm14)
	ROUND(C, D, E, F, G, H, A, B, BC, AB, W0, 0x9bdc06a7)
	LOAD(15, %xmm15)
	ROUND(B, C, D, E, F, G, H, A, AB, BC, W0, 0xc19bf174)
	SCHEDULE(%xmm0, %xmm1, %xmm9, %xmm14)
	ROUND(A, B, C, D, E, F, G, H, BC, AB, W1, 0xe49b69c1)
	SCHEDULE(%xmm1, %xmm2, %xmm10, %xmm15)
	ROUND(H, A, B, C, D, E, F, G, AB, BC, W1, 0xefbe4786)
	SCHEDULE(%xmm2, %xmm3, %xmm11, %xmm0)
	ROUND(G, H, A, B, C, D, E, F, BC, AB, W1, 0x0fc19dc6)
	SCHEDULE(%xmm3, %xmm4, %xmm12, %xmm1)
	ROUND(F, G, H, A, B, C, D, E, AB, BC, W1, 0x240ca1cc)
	SCHEDULE(%xmm4, %xmm5, %xmm13, %xmm2)
	ROUND(E, F, G, H, A, B, C, D, BC, AB, W1, 0x2de92c6f)
	SCHEDULE(%xmm5, %xmm6, %xmm14, %xmm3)
	ROUND(D, E, F, G, H, A, B, C, AB, BC, W1, 0x4a7484aa)
	SCHEDULE(%xmm6, %xmm7, %xmm15, %xmm4)
	ROUND(C, D, E, F, G, H, A, B, BC, AB, W1, 0x5cb0a9dc)
	SCHEDULE(%xmm7, %xmm8, %xmm0, %xmm5)
	ROUND(B, C, D, E, F, G, H, A, AB, BC, W1, 0x76f988da)
	SCHEDULE(%xmm8, %xmm9, %xmm1, %xmm6)
	ROUND(A, B, C, D, E, F, G, H, BC, AB, W1, 0x983e5152)
	SCHEDULE(%xmm9, %xmm10, %xmm2, %xmm7)
	ROUND(H, A, B, C, D, E, F, G, AB, BC, W1, 0xa831c66d)
	SCHEDULE(%xmm10, %xmm11, %xmm3, %xmm8)
	ROUND(G, H, A, B, C, D, E, F, BC, AB, W1, 0xb00327c8)
	SCHEDULE(%xmm11, %xmm12, %xmm4, %xmm9)
	ROUND(F, G, H, A, B, C, D, E, AB, BC, W1, 0xbf597fc7)
	SCHEDULE(%xmm12, %xmm13, %xmm5, %xmm10)
	ROUND(E, F, G, H, A, B, C, D, BC, AB, W1, 0xc6e00bf3)
	SCHEDULE(%xmm13, %xmm14, %xmm6, %xmm11)
	ROUND(D, E, F, G, H, A, B, C, AB, BC, W1, 0xd5a79147)
	SCHEDULE(%xmm14, %xmm15, %xmm7, %xmm12)
	ROUND(C, D, E, F, G, H, A, B, BC, AB, W1, 0x06ca6351)
	SCHEDULE(%xmm15, %xmm0, %xmm8, %xmm13)
	ROUND(B, C, D, E, F, G, H, A, AB, BC, W1, 0x14292967)
	SCHEDULE(%xmm0, %xmm1, %xmm9, %xmm14)
	ROUND(A, B, C, D, E, F, G, H, BC, AB, W1, 0x27b70a85)
	SCHEDULE(%xmm1, %xmm2, %xmm10, %xmm15)
	ROUND(H, A, B, C, D, E, F, G, AB, BC, W1, 0x2e1b2138)
	SCHEDULE(%xmm2, %xmm3, %xmm11, %xmm0)
	ROUND(G, H, A, B, C, D, E, F, BC, AB, W1, 0x4d2c6dfc)
	SCHEDULE(%xmm3, %xmm4, %xmm12, %xmm1)
	ROUND(F, G, H, A, B, C, D, E, AB, BC, W1, 0x53380d13)
	SCHEDULE(%xmm4, %xmm5, %xmm13, %xmm2)
	ROUND(E, F, G, H, A, B, C, D, BC, AB, W1, 0x650a7354)
	SCHEDULE(%xmm5, %xmm6, %xmm14, %xmm3)
	ROUND(D, E, F, G, H, A, B, C, AB, BC, W1, 0x766a0abb)
	SCHEDULE(%xmm6, %xmm7, %xmm15, %xmm4)
	ROUND(C, D, E, F, G, H, A, B, BC, AB, W1, 0x81c2c92e)
	SCHEDULE(%xmm7, %xmm8, %xmm0, %xmm5)
	ROUND(B, C, D, E, F, G, H, A, AB, BC, W1, 0x92722c85)
	SCHEDULE(%xmm8, %xmm9, %xmm1, %xmm6)
	ROUND(A, B, C, D, E, F, G, H, BC, AB, W1, 0xa2bfe8a1)
	SCHEDULE(%xmm9, %xmm10, %xmm2, %xmm7)
	ROUND(H, A, B, C, D, E, F, G, AB, BC, W1, 0xa81a664b)
	SCHEDULE(%xmm10, %xmm11, %xmm3, %xmm8)
	ROUND(G, H, A, B, C, D, E, F, BC, AB, W1, 0xc24b8b70)
	SCHEDULE(%xmm11, %xmm12, %xmm4, %xmm9)
	ROUND(F, G, H, A, B, C, D, E, AB, BC, W1, 0xc76c51a3)
	SCHEDULE(%xmm12, %xmm13, %xmm5, %xmm10)
	ROUND(E, F, G, H, A, B, C, D, BC, AB, W1, 0xd192e819)
	SCHEDULE(%xmm13, %xmm14, %xmm6, %xmm11)
	ROUND(D, E, F, G, H, A, B, C, AB, BC, W1, 0xd6990624)
	SCHEDULE(%xmm14, %xmm15, %xmm7, %xmm12)
	ROUND(C, D, E, F, G, H, A, B, BC, AB, W1, 0xf40e3585)
	SCHEDULE(%xmm15, %xmm0, %xmm8, %xmm13)
	ROUND(B, C, D, E, F, G, H, A, AB, BC, W1, 0x106aa070)
	SCHEDULE(%xmm0, %xmm1, %xmm9, %xmm14)
	ROUND(A, B, C, D, E, F, G, H, BC, AB, W1, 0x19a4c116)
	SCHEDULE(%xmm1, %xmm2, %xmm10, %xmm15)
	ROUND(H, A, B, C, D, E, F, G, AB, BC, W1, 0x1e376c08)
	SCHEDULE(%xmm2, %xmm3, %xmm11, %xmm0)
	ROUND(G, H, A, B, C, D, E, F, BC, AB, W1, 0x2748774c)
	SCHEDULE(%xmm3, %xmm4, %xmm12, %xmm1)
	ROUND(F, G, H, A, B, C, D, E, AB, BC, W1, 0x34b0bcb5)
	SCHEDULE(%xmm4, %xmm5, %xmm13, %xmm2)
	ROUND(E, F, G, H, A, B, C, D, BC, AB, W1, 0x391c0cb3)
	SCHEDULE(%xmm5, %xmm6, %xmm14, %xmm3)
	ROUND(D, E, F, G, H, A, B, C, AB, BC, W1, 0x4ed8aa4a)
	SCHEDULE(%xmm6, %xmm7, %xmm15, %xmm4)
	ROUND(C, D, E, F, G, H, A, B, BC, AB, W1, 0x5b9cca4f)
	SCHEDULE(%xmm7, %xmm8, %xmm0, %xmm5)
	ROUND(B, C, D, E, F, G, H, A, AB, BC, W1, 0x682e6ff3)
	SCHEDULE(%xmm8, %xmm9, %xmm1, %xmm6)
	ROUND(A, B, C, D, E, F, G, H, BC, AB, W1, 0x748f82ee)
	SCHEDULE(%xmm9, %xmm10, %xmm2, %xmm7)
	ROUND(H, A, B, C, D, E, F, G, AB, BC, W1, 0x78a5636f)
	SCHEDULE(%xmm10, %xmm11, %xmm3, %xmm8)
	ROUND(G, H, A, B, C, D, E, F, BC, AB, W1, 0x84c87814)
	SCHEDULE(%xmm11, %xmm12, %xmm4, %xmm9)
	ROUND(F, G, H, A, B, C, D, E, AB, BC, W1, 0x8cc70208)
	SCHEDULE(%xmm12, %xmm13, %xmm5, %xmm10)
	ROUND(E, F, G, H, A, B, C, D, BC, AB, W1, 0x90befffa)
	SCHEDULE(%xmm13, %xmm14, %xmm6, %xmm11)
	ROUND(D, E, F, G, H, A, B, C, AB, BC, W1, 0xa4506ceb)
	SCHEDULE(%xmm14, %xmm15, %xmm7, %xmm12)
	ROUND(C, D, E, F, G, H, A, B, BC, AB, W1, 0xbef9a3f7)
	SCHEDULE(%xmm15, %xmm0, %xmm8, %xmm13)
	ROUND(B, C, D, E, F, G, H, A, AB, BC, W1, 0xc67178f2)

	addl	A, 0(%rdi)
	addl	B, 4(%rdi)
	addl	C, 8(%rdi)
	addl	D, 12(%rdi)
	addl	E, 16(%rdi)
	addl	F, 20(%rdi)
	addl	G, 24(%rdi)
	addl	H, 28(%rdi)
	addq	$64, %rsi
	decq	(%rsp)
	jnz	.Lblock
	popq	%rdx
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbp
	popq	%rbx
.Lnone:
	ret
	.size sha256_blocks_sse2, . - sha256_blocks_sse2

	.section .note.GNU-stack, "", @progbits
